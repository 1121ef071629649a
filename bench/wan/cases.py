"""What the WAN benchmark runs: the replicators, their settings, and each case's windows.

A case is a replicator (ferry or MirrorMaker 2) with a set of client settings ("default" or
"wan"), in a placement: `near-target` (Kafka's advice: the replicator runs next to the target
and consumes across the link) or `near-source` (it runs next to the source and produces across
the link). The link's windows come from the settings of the client that carries the data.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from bench import java_tools
from bench.harness import MeasuredProcess
from bench.replicators import Ferry, MirrorMaker2
from bench.wan.model import BROKER_RECEIVE_BUFFER, OsBuffers, Windows, windows_for
from ferry.engine.copy.client_settings import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS
from ferry.engine.link_settings import wan_consumer_settings

__all__ = [
    "FERRY_WAN",
    "MM2_WAN",
    "TARGET_BROKER_WAN",
    "Case",
    "case_windows",
    "cases_for",
    "ferry_lines",
    "mm2_settings",
    "profile_cases",
    "with_settings",
]

# ferry's source consumer across a link (librdkafka keys, under `A.consumer.`): the receive
# buffer left to the OS's autotuning (an explicit size is capped at net.core.rmem_max, often
# 208 KiB), and larger fetches per partition so that one fetch per round trip carries more.
FERRY_WAN: dict[str, str] = {
    "socket.receive.buffer.bytes": "0",
    "max.partition.fetch.bytes": "4194304",
    "fetch.max.bytes": "52428800",
}
# MirrorMaker 2's source consumers (Java keys, under `A.consumer.`): the same.
MM2_WAN: dict[str, str] = {
    "receive.buffer.bytes": "-1",
    "max.partition.fetch.bytes": "4194304",
    "fetch.max.bytes": "52428800",
}
# Producing across the link: the target's brokers' receive buffer is the window.
TARGET_BROKER_WAN: dict[str, str] = {"socket.receive.buffer.bytes": "-1"}

# What adds to ferry's latency across a link (`--profile`): each on top of the WAN settings.
PROFILE_VARIANTS: dict[str, tuple[str, ...]] = {
    "": (),
    "linger.ms=0": ("B.producer.linger.ms=0",),
    "commit.interval.ms=200": ("ferry.commit.interval.ms=200",),
    "commit.interval.ms=5000": ("ferry.commit.interval.ms=5000",),
    "fetch.wait.max.ms=500": ("A.consumer.fetch.wait.max.ms=500",),
    "fetch.min.bytes=65536": ("A.consumer.fetch.min.bytes=65536",),
}
# Next to the source the producer crosses the link: what of its path adds latency there.
NEAR_SOURCE_PROFILE_VARIANTS: dict[str, tuple[str, ...]] = {
    "": (),
    "linger.ms=0": ("B.producer.linger.ms=0",),
    "compression.type=none": ("B.producer.compression.type=none",),
    "commit.interval.ms=5000": ("ferry.commit.interval.ms=5000",),
    "max.in.flight=1": ("B.producer.max.in.flight.requests.per.connection=1",),
    "copier=python": ("ferry.copier=python",),
}


@dataclass(frozen=True)
class Case:
    replicator: str  # ferry | mm2
    settings: str  # default | wan
    placement: str  # near-target | near-source
    variant: str = ""  # a name for `extra`
    extra: tuple[str, ...] = ()  # more `key=value` lines of ferry's config

    @property
    def label(self) -> str:
        where = "" if self.placement == "near-target" else ", next to the source"
        variant = f" + {self.variant}" if self.variant else ""
        return f"{self.replicator} {self.settings}{variant}{where}"

    def source_settings(self) -> dict[str, str]:
        """The source consumer's settings this case gives beyond the benchmark's own."""
        if self.settings == "default":
            return {}
        return dict(FERRY_WAN if self.replicator == "ferry" else MM2_WAN)


def case_windows(
    case: Case,
    os: OsBuffers,
    target_broker: Mapping[str, str] | None = None,
    rtt_ms: float = 0.0,
) -> Windows:
    """The windows of the client that carries the records across the link in `case`. ferry
    measures how far its source is and, across a wide-area link (`rtt_ms`), sets the WAN
    settings the case leaves unset itself (engine/link_settings.py): its window is the one
    those give, as the link must model what the client asked its kernel for."""
    if case.placement == "near-target":
        client = "librdkafka" if case.replicator == "ferry" else "java-consumer"
        settings = case.source_settings()
        if case.replicator == "ferry":
            settings = {**wan_consumer_settings(rtt_ms, settings), **settings}
        if case.replicator == "ferry" and "socket.receive.buffer.bytes" not in settings:
            settings["socket.receive.buffer.bytes"] = CONSUMER_DEFAULTS[
                "socket.receive.buffer.bytes"
            ]
        return windows_for(client, settings, os)
    broker = int((target_broker or {}).get("socket.receive.buffer.bytes", BROKER_RECEIVE_BUFFER))
    if case.replicator == "ferry":
        return windows_for("librdkafka", PRODUCER_DEFAULTS, os, broker_receive=broker)
    return windows_for("java-producer", {}, os, broker_receive=broker)


def ferry_lines(case: Case) -> list[str]:
    """`key=value` lines of ferry's config for the case (the source is cluster A)."""
    lines = [f"A.consumer.{key}={value}" for key, value in case.source_settings().items()]
    return lines + list(case.extra)


def mm2_settings(
    bootstraps: tuple[str, str], topics: str, tasks: int, run_id: str, case: Case
) -> dict[str, str]:
    """The benchmark's MM2 config (`java_tools.mm2_properties`: ferry's producer settings on
    the target side) with the source consumer as the case says: Kafka's defaults, or them
    with the WAN settings."""
    settings = {
        key: value
        for key, value in java_tools.mm2_properties(bootstraps, topics, tasks, run_id).items()
        if not key.startswith("A.consumer.")
    }
    settings.update({f"A.consumer.{k}": v for k, v in case.source_settings().items()})
    return settings


class WanMirrorMaker2(MirrorMaker2):
    """MirrorMaker 2 with the case's source consumer settings."""

    def __init__(self, bootstraps: tuple[str, str], tasks: int, case: Case) -> None:
        super().__init__(bootstraps, tasks)
        self.case = case
        self.run_id = ""

    def internal_topics(self) -> list[str]:
        """Connect's topics of the last start, on the target."""
        return java_tools.mm2_internal_topics(self.run_id) if self.run_id else []

    def start(self, run_dir: Path, topic: str, *, once: bool = False) -> MeasuredProcess:
        run_dir.mkdir(parents=True, exist_ok=True)
        run_id = self.run_id = uuid.uuid4().hex[:12]
        settings = mm2_settings(self.bootstraps, topic, self.tasks, run_id, self.case)
        properties = java_tools.write_properties(run_dir / "mm2.properties", settings)
        log_config = java_tools.write_log_config(run_dir, "mm2")
        return MeasuredProcess(java_tools.mm2_command(properties, log_config), run_dir / "mm2")


def replicator_for(case: Case, bootstraps: tuple[str, str], tasks: int) -> Ferry | MirrorMaker2:
    if case.replicator == "ferry":
        return Ferry(bootstraps, ferry_lines(case))
    return WanMirrorMaker2(bootstraps, tasks, case)


def cases_for(args: argparse.Namespace, first_link: bool) -> list[Case]:
    """The cases of one link, from `--replicators`, `--settings` and `--near-source`."""
    replicators = [r.strip() for r in args.replicators.split(",") if r.strip()]
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    cases = [Case(r, s, "near-target") for r in replicators for s in settings]
    if args.near_source == "all" or (args.near_source == "first" and first_link):
        cases += [Case(r, "wan", "near-source") for r in replicators]
    return cases


def profile_cases(placement: str = "near-target") -> list[Case]:
    """ferry with the WAN settings and each variant of the placement on top
    (`PROFILE_VARIANTS` next to the target, `NEAR_SOURCE_PROFILE_VARIANTS` next to the source)."""
    variants = PROFILE_VARIANTS if placement == "near-target" else NEAR_SOURCE_PROFILE_VARIANTS
    return [Case("ferry", "wan", placement, name, extra) for name, extra in variants.items()]


def with_settings(case: Case, lines: list[str]) -> Case:
    """A ferry case with more `key=value` lines of ferry's config (named in its variant)."""
    if not lines or case.replicator != "ferry":
        return case
    variant = " + ".join(x for x in (case.variant, *lines) if x)
    return replace(case, variant=variant, extra=(*case.extra, *lines))
