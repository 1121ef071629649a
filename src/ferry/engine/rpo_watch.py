"""`ferry run`'s recovery point objective per flow, for its `/metrics` and its API.

A thread measures every flow's RPO every `INTERVAL_SECONDS`: the flow's positions are its own,
from its state (what it committed on the target, as `ferry_lag_records` counts them); the
source's ends are read (read_committed), `ENDS_SECONDS` at most, for every partition the
flow has copied or planned; and for each lagging partition the first record not copied is
read, one consumer per flow, one record per partition, `READ_SECONDS` at most
(`ferry.kafka.rpo_probe`; the rule is `ferry.flows.rpo`). Both are the bounds `ferry status`
gives these reads: a process sharing busy cores with Spark's JVMs can need seconds for a new
client's first answer. The result goes to the flow's state directory (`rpo.json`), stamped with
the moment the measurement began (a measurement that began before a fault describes the source
as it was then), where ferry run's `ferry_rpo_seconds` gauge and the API's `rpo_seconds` read it.

What a reader is given is never a guess: a partition not read in time is unknown (the gauge
NaN, the API null), and so is every partition when the last measurement is older than
`STALE_SECONDS` (the watch stopped, or a cluster did not answer since) or was written by an
earlier run. The first measurement comes one interval after the start, so a short `--once`
run reads nothing.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ferry.config.model import FerryConfig, FlowConfig
from ferry.engine.flow_state import FlowState, tp_key
from ferry.errors import FerryError
from ferry.flows.rpo import DESCRIPTION, flow_rpo
from ferry.kafka.rpo_probe import DEFAULT_TIMEOUT, last_stable_offsets, read_rpos

__all__ = ["FlowRpo", "RpoMetrics", "RpoWatch", "read_rpo"]

INTERVAL_SECONDS = 10.0
ENDS_SECONDS = 10.0  # for the source's ends (a new admin client: metadata, then the leaders)
READ_SECONDS = DEFAULT_TIMEOUT  # then the first records not copied (ferry status's bound too)
STALE_SECONDS = 3 * INTERVAL_SECONDS + ENDS_SECONDS + READ_SECONDS
RPO_FILE = "rpo.json"


@dataclass(frozen=True)
class FlowRpo:
    """A flow's last measured RPO: per partition ("topic:partition") and the worst; None
    where not known."""

    # When the measurement began (seconds since the epoch; None: never): the figure describes
    # the source as read from then on, so a reader never takes it for a later moment's.
    at: float | None
    partitions: dict[str, float | None]

    @property
    def worst(self) -> float | None:
        return flow_rpo(self.partitions.values()) if self.at is not None else None


def read_rpo(state: FlowState, now: float | None = None) -> FlowRpo:
    """The flow's last measured RPO; every partition unknown when it is stale."""
    try:
        data = json.loads((state.directory / RPO_FILE).read_text())
        at = float(data["at"])
        partitions = {str(k): _seconds(v) for k, v in dict(data["partitions"]).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return FlowRpo(None, {})
    if (time.time() if now is None else now) - at > STALE_SECONDS:
        return FlowRpo(None, dict.fromkeys(partitions))
    return FlowRpo(at, partitions)


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def _write_rpo(state: FlowState, at: float, rpos: dict[tuple[str, int], float | None]) -> None:
    state.directory.mkdir(parents=True, exist_ok=True)
    tmp = state.directory / f".{RPO_FILE}.{os.getpid()}.tmp"
    partitions = {tp_key(t, p): rpo for (t, p), rpo in sorted(rpos.items())}
    tmp.write_text(json.dumps({"at": at, "partitions": partitions}))
    tmp.replace(state.directory / RPO_FILE)


class RpoWatch:
    """The thread that measures each flow's RPO; a context manager (stopped on exit)."""

    def __init__(
        self,
        config: FerryConfig,
        flows: list[tuple[FlowConfig, FlowState]],
        *,
        interval: float = INTERVAL_SECONDS,
    ) -> None:
        self._config = config
        self._flows = flows
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ferry-rpo", daemon=True)

    def measure(self, flow: FlowConfig, state: FlowState) -> None:
        """One measurement of `flow`, written to its state; a cluster that does not answer
        leaves the last one, which goes stale."""
        source = self._config.clusters[flow.source]
        began = time.time()
        stats = state.stats()
        positions = {
            _tp(key): int(entry.get("position", 0))
            for key, entry in stats.get("partitions", {}).items()
        }
        # Topics taken out of the flow (over the API, or refused by the graph) are not copied
        # on purpose: their growing age is no recovery point of this flow.
        dropped = state.control().removed | state.refused()
        partitions = {
            tp
            for tp in set(positions) | {_tp(key) for key in state.latest()}
            if tp[0] not in dropped
        }
        if not partitions:
            return  # nothing planned yet: not known, rather than a flow with nothing at risk
        try:
            ends = last_stable_offsets(source, partitions, timeout=ENDS_SECONDS)
            rpos: dict[tuple[str, int], float | None] = dict.fromkeys(partitions)
            rpos.update(read_rpos(source, positions, ends, timeout=READ_SECONDS))
        except FerryError:
            return
        _write_rpo(state, began, rpos)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            for flow, state in self._flows:
                if self._stop.is_set():
                    return
                try:
                    self.measure(flow, state)
                except Exception:  # the last figure goes stale: unknown, never wrong
                    continue

    def __enter__(self) -> RpoWatch:
        for _flow, state in self._flows:  # an earlier run's figures are not this one's
            (state.directory / RPO_FILE).unlink(missing_ok=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(ENDS_SECONDS + READ_SECONDS + 2)


class RpoMetrics(Collector):
    """`ferry_rpo_seconds{flow,topic,partition}` of ferry run, from each flow's `rpo.json`."""

    def __init__(self, flows: Callable[[], list[tuple[str, FlowState]]]) -> None:
        self._flows = flows

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            "ferry_rpo_seconds", DESCRIPTION, labels=["flow", "topic", "partition"]
        )
        for name, state in self._flows():
            for key, rpo in read_rpo(state).partitions.items():
                topic, _, partition = key.rpartition(":")
                gauge.add_metric([name, topic, partition], math.nan if rpo is None else rpo)
        yield gauge


def _tp(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)
