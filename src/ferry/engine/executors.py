"""Which executor copies what: per-executor counts and rates from leased tasks' reports.

Pure code. Every leased task reports, after each commit, its cumulative results together with
the executor it runs on and when it began (`FlowState.write_live`). An operator asks two
things of them: which node copies which partitions now, and how fast each node copies. So:

- running tasks (the current lease's reports) give each executor its partitions and its rate,
  records acknowledged since its tasks began over the time since then;
- totals add what ended leases' tasks copied on the executor (kept in the flow's stats when a
  lease ends) to what the running ones copied so far.

An executor is named by Spark's executor id (`driver` in local mode) and its host; a task that
could not tell reports `unknown`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["UNKNOWN", "ExecutorStats", "TaskReport", "add_totals", "held_partitions", "summarize"]

UNKNOWN = "unknown"


@dataclass(frozen=True)
class TaskReport:
    """One leased task's latest report: its executor, start (wall seconds) and partitions."""

    executor: str
    host: str
    began: float
    partitions: list[dict[str, Any]]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TaskReport:
        where = data.get("executor") or {}
        return cls(
            str(where.get("id", UNKNOWN)),
            str(where.get("host", UNKNOWN)),
            float(data.get("began", 0.0)),
            list(data.get("partitions", [])),
        )

    @property
    def records(self) -> int:
        return sum(int(p.get("copied", 0)) for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(int(p.get("bytes", 0)) for p in self.partitions)


@dataclass
class ExecutorStats:
    executor: str
    host: str
    partitions: list[str] = field(default_factory=list)  # `topic:partition` it copies now
    records: int = 0  # acknowledged copies, whole run (ended leases and running tasks)
    bytes: int = 0
    records_per_second: float = 0.0  # its running tasks, since they began

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "partitions": self.partitions,
            "records": self.records,
            "bytes": self.bytes,
            "records_per_second": round(self.records_per_second, 1),
        }


def summarize(
    running: Iterable[TaskReport], totals: Mapping[str, Mapping[str, Any]], now: float
) -> dict[str, ExecutorStats]:
    """Per executor: the partitions its running tasks copy, its rate since they began, and its
    records so far (`totals`: what ended leases' tasks copied, per executor, as `add_totals`
    keeps them). Executors known only from `totals` are listed with no partitions, rate 0."""
    stats: dict[str, ExecutorStats] = {}
    for name, total in totals.items():
        stats[name] = ExecutorStats(
            name,
            str(total.get("host", UNKNOWN)),
            [],
            int(total.get("records", 0)),
            int(total.get("bytes", 0)),
        )
    rates: dict[str, float] = {}
    for task in running:
        entry = stats.setdefault(task.executor, ExecutorStats(task.executor, task.host))
        entry.host = task.host
        entry.records += task.records
        entry.bytes += task.bytes
        entry.partitions.extend(f"{p['topic']}:{p['partition']}" for p in task.partitions)
        # Tasks of one executor run side by side (one per core): their rates add up.
        if now > task.began > 0:
            rates[task.executor] = rates.get(task.executor, 0.0) + task.records / (now - task.began)
    for name, entry in stats.items():
        entry.partitions.sort()
        entry.records_per_second = rates.get(name, 0.0)
    return dict(sorted(stats.items()))


def add_totals(totals: dict[str, Any], ended: Iterable[TaskReport]) -> None:
    """Fold the last reports of a lease's ended tasks into the per-executor totals."""
    for task in ended:
        entry = totals.setdefault(task.executor, {"host": task.host, "records": 0, "bytes": 0})
        entry["host"] = task.host
        entry["records"] += task.records
        entry["bytes"] += task.bytes


def held_partitions(reports: Iterable[TaskReport]) -> dict[tuple[str, int], str]:
    """The partitions the latest report on each says hold, and why (a retried task's earlier
    attempt may have held where the later one copies)."""
    latest: dict[tuple[str, int], tuple[float, str]] = {}
    for report in reports:
        for entry in report.partitions:
            tp = (str(entry["topic"]), int(entry["partition"]))
            if tp not in latest or report.began >= latest[tp][0]:
                latest[tp] = (report.began, str(entry.get("held", "")))
    return {tp: why for tp, (_began, why) in latest.items() if why}
