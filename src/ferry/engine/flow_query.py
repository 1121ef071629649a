"""One flow of `ferry run`: its Spark streaming query, started, looked at, stopped after its
batch, and what it copied so far. When the query stops, its `FlowSupervisor` says what next.

A query that failed is turned back into the ferry error that stopped it
(`ferry.errors.error_from_text`), so the supervisor can tell a cluster that does not answer
(retried; the query restarts from its checkpoint, so nothing is lost or skipped) from anything
else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ferry.config.model import FlowConfig
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.flow_supervisor import FlowSupervisor
from ferry.engine.head_start import HeadStart
from ferry.engine.spark.cluster import environment_error
from ferry.errors import FerryError, error_from_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["FlowProgress", "FlowQuery", "lost_notices", "query_error"]

# How long a stopping run waits for a flow's running batch to finish.
STOP_WAIT_SECONDS = 120

_TRACEBACK = "Traceback (most recent call last):"


@dataclass
class FlowProgress:
    """What the progress view and the summary show for one flow."""

    name: str
    records: int = 0
    bytes: int = 0
    skipped: int = 0  # records not copied back to the cluster they came from (loop prevention)
    expired: int = 0  # records the source deleted (retention) before ferry could copy them
    lag: int = 0
    seconds: float = 0.0
    records_per_second: float = 0.0
    mb_per_second: float = 0.0
    done: bool = False
    restarts: int = 0
    copier: str = ""  # the copy loop of the latest batch: native or python


def query_error(flow: str, text: str) -> FerryError:
    """The ferry error a failed query's exception text carries, or one naming its first line."""
    return (
        error_from_text(text)
        or environment_error(text)
        or FerryError(f"flow {flow} failed in Spark: {_failure_summary(text)}")
    )


@dataclass
class FlowQuery:
    flow: FlowConfig
    spec: FlowSpec
    state: FlowState
    supervisor: FlowSupervisor
    query: Any = None
    started: float = 0.0
    baseline: dict[str, Any] | None = None  # the counters when this run began copying
    head: HeadStart | None = None  # the driver's copy while Spark started
    progress: FlowProgress = field(init=False)
    last_sample: tuple[float, int, int] = (0.0, 0, 0)
    # The counters as last read, and what they were read from: the progress is looked at four
    # times a second, and reading 10,000 partitions' counters takes most of a core.
    _stats: tuple[tuple[Any, ...], dict[str, Any]] = ((), {})
    _lost_said: dict[str, int] = field(default_factory=dict)  # lost records said, by partition
    _notices_at: int | None = None  # how far the flow's notices file was read

    def __post_init__(self) -> None:
        self.progress = FlowProgress(self.flow.name)

    def start(self, spark: SparkSession, *, once: bool) -> None:
        spec_json = self.spec.model_dump_json()
        reader = spark.readStream.format("ferry-mirror").option("spec", spec_json).load()
        writer = (
            reader.writeStream.format("ferry-mirror")
            .option("spec", spec_json)
            .option(
                "checkpointLocation",
                str(self.state.lease_checkpoint if self.spec.leased else self.state.checkpoint),
            )
            .queryName(f"ferry {self.flow.source} to {self.flow.target}")
        )
        if once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.flow.trigger_interval_ms} milliseconds")
        self.state.stop_marker.unlink(missing_ok=True)
        if self.baseline is None:
            self.baseline = self.state.stats()
            self.started = time.monotonic()
            self._notices_at = self.state.notices_end()
        self.query = writer.start()
        self.supervisor.started()

    def check(self, spark: SparkSession, *, once: bool, stopping: bool) -> None:
        """Look at the query once: start it again when due, mark it done, or hand its failure
        to the supervisor (which may raise: the run stops)."""
        if self.progress.done:
            return
        if self.query is None:
            if self.supervisor.due():
                self.start(spark, once=once)
            return
        if self.query.isActive:
            self.supervisor.running(progressed=self.query.lastProgress is not None)
            return
        failure = self.query.exception()
        if failure is None:
            self.progress.done = True  # --once reached the end offsets seen at start
            self.progress.seconds = time.monotonic() - self.started
            return
        self.supervisor.stopped(query_error(self.flow.name, str(failure)), stopping=stopping)
        self.query = None
        self.progress.restarts = self.supervisor.restarts

    def running(self) -> bool:
        return self.query is not None and bool(self.query.isActive)

    def ask_to_stop(self) -> None:
        """Tell the planner to plan no more batches (under steady traffic a new one starts as
        soon as one ends)."""
        if self.running():
            self.state.directory.mkdir(parents=True, exist_ok=True)
            self.state.stop_marker.touch()

    def stop_after_batch(self) -> None:
        """Let the running batch finish (its copies are acked and committed), then stop."""
        if not self.running():
            return
        deadline = time.monotonic() + STOP_WAIT_SECONDS
        while self.query.status.get("isTriggerActive") and time.monotonic() < deadline:
            time.sleep(0.1)
        self.query.stop()
        self.state.stop_marker.unlink(missing_ok=True)
        self.progress.seconds = time.monotonic() - self.started

    def stop(self) -> None:
        """Stop the query now, if it runs."""
        if self.running():
            self.query.stop()

    def update_progress(self, now: float, notice: Callable[[str], None]) -> None:
        signature = self.state.stats_signature()
        if signature != self._stats[0] or not signature:
            self._stats = (signature, self.state.stats())
        stats = self._stats[1]
        base = self.baseline or {}
        p = self.progress
        p.records = stats.get("records", 0) - base.get("records", 0)
        p.copier = stats.get("copier", p.copier) or (self.head.copier if self.head else "")
        p.bytes = stats.get("bytes", 0) - base.get("bytes", 0)
        p.skipped = stats.get("skipped", 0) - base.get("skipped", 0)
        if self._notices_at is not None:
            lines, self._notices_at = self.state.notices_after(self._notices_at)
            for line in lines:
                notice(line)
        expired = stats.get("expired", 0) - base.get("expired", 0)
        if expired > p.expired:
            for line in lost_notices(self.flow, stats, base, self._lost_said):
                notice(line)
            p.expired = expired
        p.lag = self.state.lag(stats)
        if not p.done:
            p.seconds = now - self.started
        then, records, size = self.last_sample
        if now - then >= 1.0:
            if then:
                p.records_per_second = (p.records - records) / (now - then)
                p.mb_per_second = (p.bytes - size) / (now - then) / 1e6
            self.last_sample = (now, p.records, p.bytes)


def lost_notices(
    flow: FlowConfig, stats: dict[str, Any], base: dict[str, Any], said: dict[str, int]
) -> list[str]:
    """One line per partition that lost records since `said` (updated here): records the
    source removed (retention, DeleteRecords) before ferry copied them, with the offsets."""
    lines = []
    before = base.get("partitions", {})
    for key, entry in sorted(stats.get("partitions", {}).items()):
        lost = entry.get("expired", 0) - before.get(key, {}).get("expired", 0)
        if lost <= said.get(key, 0):
            continue
        new, said[key] = lost - said.get(key, 0), lost
        ranges: list[str] = []
        counted = 0
        for first, last, count in reversed(entry.get("lost", [])):
            ranges.insert(0, f"{first}..{last}")
            counted += count
            if counted >= new:
                break
        topic, _, partition = key.rpartition(":")
        offsets = f"offsets {', '.join(ranges)}" if ranges else "offsets not known"
        lines.append(
            f"flow {flow.name}: {new} record(s) lost: removed from the source by retention or "
            f"deletion before ferry copied them: cluster {flow.source}, topic {topic}, "
            f"partition {partition}: {offsets}; copying on from the source's log start"
        )
    return lines


def _failure_summary(text: str) -> str:
    """The line of a failed query's text that says what failed: its first line, or where that
    opens a Python traceback (a Python worker's exception), the exception and the frame that
    raised it: "Traceback (most recent call last):" alone tells an operator nothing."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    opened = next((i for i, line in enumerate(lines) if line.endswith(_TRACEBACK)), None)
    if opened is None:
        return lines[0].strip()[:500] if lines else text[:500]
    body = lines[opened + 1 :]
    # A traceback's frames are indented; the exception's own line is not.
    raised = next((i for i, line in enumerate(body) if not line[0].isspace()), None)
    if raised is None:
        return lines[opened].strip()[:500]
    frames = [line.strip() for line in body[:raised] if line.strip().startswith("File ")]
    where = f" (raised at {frames[-1]})" if frames else ""
    head = lines[opened][: -len(_TRACEBACK)].strip()
    return f"{head} {body[raised].strip()}{where}".strip()[:1000]
