"""The fault-test harness: steady traffic into A, `ferry run` replicating to B, faults, an audit.

Modelled on Kafka's own system test of its transactional copier: a producer writes steadily
(acks=all, every acknowledged record recorded) while ferry is killed and restarted, stopped
and restarted, and each cluster's broker is killed and restarted. When the faults are over
and the traffic stopped, ferry catches up; then a read_committed consumer reads B whole and
the audit compares it with what A holds, partition by partition: lost, duplicated, reordered
and changed records. A tailing consumer on B measures the worst replication lag meanwhile.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ferry.local import clusters as local
from tests.chaos.audit import Audit, audit
from tests.chaos.faults import FerryProcess, restart_after_kill
from tests.chaos.observer import LagMonitor, read_copies, read_source
from tests.chaos.traffic import SteadyProducer
from tests.integration.kafka_helpers import create_topic
from tests.integration.replication_setup import write_config

__all__ = ["FULL_SCHEDULE", "SHORT_SCHEDULE", "ChaosReport", "ChaosSettings", "run_chaos"]

TOPIC = "chaos"
# The fault test: ferry SIGKILLed five times and SIGTERMed twice (each time restarted), the target's
# and the source's broker each SIGKILLed once and restarted; interleaved.
FULL_SCHEDULE = (
    "sigkill-ferry",
    "sigkill-ferry",
    "sigterm-ferry",
    "kill-target-broker",
    "sigkill-ferry",
    "kill-source-broker",
    "sigkill-ferry",
    "sigterm-ferry",
    "sigkill-ferry",
)
SHORT_SCHEDULE = ("sigkill-ferry", "kill-target-broker", "sigterm-ferry")


@dataclass(frozen=True)
class ChaosSettings:
    mode: str = "exactly-once"  # or "at-least-once"
    schedule: Sequence[str] = FULL_SCHEDULE
    rate: float = 2000.0  # records a second into A
    min_records: int = 100_000  # traffic goes on at least until this many were sent
    partitions: int = 4
    batch_max_records: int = 5000
    # After each fault ferry must copy this many records before the next one; then a random
    # pause (seeded) so the faults land at different points of a batch.
    progress_between_faults: int = 2000
    max_jitter_seconds: float = 3.0
    seed: int = 6
    recovery_timeout: float = 300.0


@dataclass
class ChaosReport:
    mode: str
    sent: int = 0
    acked: int = 0
    failed_sends: int = 0
    source_records: int = 0
    copies: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    mismatched: int = 0
    foreign: int = 0
    acked_missing_in_source: int = 0
    aborted_in_log: int = 0  # copies only read_uncommitted sees (aborted transactions)
    max_lag_seconds: float = 0.0
    seconds: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    ferry_starts: int = 0
    partitions: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def run_chaos(
    settings: ChaosSettings, workdir: Path, say: Callable[[str], None] = print
) -> ChaosReport:
    workdir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    brokers = local.up(["A", "B"], workdir / "clusters")
    try:
        return _run(settings, workdir, brokers, began, say)
    finally:
        local.down(workdir / "clusters")


def _run(
    settings: ChaosSettings,
    workdir: Path,
    brokers: dict[str, Any],
    began: float,
    say: Callable[[str], None],
) -> ChaosReport:
    a, b = brokers["A"].bootstrap, brokers["B"].bootstrap
    create_topic(a, TOPIC, settings.partitions)
    remote = f"A.{TOPIC}"
    flow_settings: dict[str, Any] = {
        "exactly.once.source.support": "enabled" if settings.mode == "exactly-once" else "disabled",
        "ferry.batch.max.records": settings.batch_max_records,
    }
    config = write_config(workdir, brokers, topics=TOPIC, **flow_settings)
    report = ChaosReport(settings.mode)
    traffic = SteadyProducer(a, TOPIC, settings.partitions, settings.rate).start()
    monitor = LagMonitor(b, remote, settings.partitions).start()
    ferry = FerryProcess(config, workdir)
    rng = random.Random(settings.seed)
    try:
        ferry.start()
        _await_progress(monitor, ferry, settings, "ferry's first copies")
        for number, fault in enumerate(settings.schedule, 1):
            time.sleep(rng.uniform(0, settings.max_jitter_seconds))  # deliberate: fault timing
            at = time.monotonic() - began
            detail = _inject(fault, ferry, brokers)
            report.faults.append({"fault": fault, "at_seconds": round(at, 1), **detail})
            say(f"fault {number}/{len(settings.schedule)}: {fault} at {at:.0f}s {detail or ''}")
            _await_progress(monitor, ferry, settings, f"recovery from {fault}")
        while traffic.sent < settings.min_records:
            _check_alive(ferry)
            time.sleep(0.5)
        traffic.stop()
        source = read_source(a, TOPIC, settings.partitions)  # final: the traffic stopped
        ends = {p: records[-1][0] + 1 if records else 0 for p, records in source.items()}
        say(f"traffic stopped: {traffic.acked} acked; waiting for ferry to catch up")
        _wait(lambda: monitor.reached(ends), settings.recovery_timeout, ferry, "the catch-up")
        ferry.sigterm()
    finally:
        traffic.stop()
        monitor.stop()
        if ferry.alive():
            ferry.sigkill()
    copies = read_copies(b, remote, settings.partitions)
    everything = read_copies(b, remote, settings.partitions, committed=False)
    result = audit(source, copies)
    _fill(report, result, traffic, monitor, ferry)
    held = {(p, offset) for p, records in source.items() for offset, _ in records}
    report.acked_missing_in_source = sum(1 for key in traffic.ack_times if key not in held)
    report.aborted_in_log = sum(map(len, everything.values())) - report.copies
    report.seconds = round(time.monotonic() - began, 1)
    return report


def _inject(fault: str, ferry: FerryProcess, brokers: dict[str, Any]) -> dict[str, Any]:
    if fault == "sigkill-ferry":
        ferry.sigkill()
        ferry.start()
        return {}
    if fault == "sigterm-ferry":
        code = ferry.sigterm()
        ferry.start()
        return {"exit_code": code}
    if fault in ("kill-target-broker", "kill-source-broker"):
        broker = brokers["B" if fault == "kill-target-broker" else "A"]
        down = time.monotonic()
        restart_after_kill(broker)
        return {"down_seconds": round(time.monotonic() - down, 1)}
    raise ValueError(f"unknown fault {fault!r}")


def _await_progress(
    monitor: LagMonitor, ferry: FerryProcess, settings: ChaosSettings, what: str
) -> None:
    target = monitor.seen + settings.progress_between_faults
    _wait(lambda: monitor.seen >= target, settings.recovery_timeout, ferry, what)


def _wait(condition: Callable[[], bool], timeout: float, ferry: FerryProcess, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        _check_alive(ferry)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.2)


def _check_alive(ferry: FerryProcess) -> None:
    if not ferry.alive():
        ferry._running()  # raises with the end of its log


def _fill(
    report: ChaosReport,
    result: Audit,
    traffic: SteadyProducer,
    monitor: LagMonitor,
    ferry: FerryProcess,
) -> None:
    report.sent, report.acked, report.failed_sends = traffic.sent, traffic.acked, traffic.failed
    report.source_records = result.total("source")
    report.copies = result.total("copies")
    for name in ("lost", "duplicated", "reordered", "mismatched", "foreign"):
        setattr(report, name, result.total(name))
    report.max_lag_seconds = round(monitor.max_lag_seconds, 2)
    report.ferry_starts = ferry.starts
    report.partitions = [asdict(p) for p in result.partitions]


def markdown(reports: Sequence[ChaosReport]) -> str:
    """One row per mode."""
    columns = [
        ("mode", "mode"),
        ("source records", "source_records"),
        ("copies", "copies"),
        ("lost", "lost"),
        ("duplicated", "duplicated"),
        ("reordered", "reordered"),
        ("changed", "mismatched"),
        ("aborted in log", "aborted_in_log"),
        ("max lag s", "max_lag_seconds"),
        ("faults", "faults"),
        ("seconds", "seconds"),
    ]
    lines = [
        "| " + " | ".join(title for title, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for report in reports:
        cells = []
        for _, name in columns:
            value = getattr(report, name)
            if name == "faults":
                value = len(value)
            elif isinstance(value, int):
                value = f"{value:,}"
            cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
