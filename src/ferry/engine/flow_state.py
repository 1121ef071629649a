"""A flow's small on-disk state besides Spark's checkpoint: counters and the latest offsets.

The sink's commit (after the target acked a batch) adds the batch to `stats.json`. A leased
task, which runs for the whole lease, writes what it committed so far to `live/<task>.json`
after every slice; `stats()` adds those in, and the lease's commit absorbs them into
`stats.json` (naming them there first, so no reader counts one twice or misses one). The planner
writes the source's latest offsets to `latest.json`. The planner reads record sizes back for
admission control; `ferry run` reads both for its progress view and summary. Losing these
files loses no data: they are statistics, rewritten atomically.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.engine.executors import ExecutorStats, TaskReport, add_totals, summarize
from ferry.engine.latency import Histogram
from ferry.flows.override import FlowControl

__all__ = ["FlowState", "LeaseBounds", "lost_ranges", "partition_entry", "tp_key"]


@dataclass(frozen=True)
class LeaseBounds:
    """When a lease's tasks ran (wall clock), and in which `ferry run`."""

    run_id: str
    began_at: float
    ended_at: float


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class FlowState:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @property
    def checkpoint(self) -> Path:
        """Spark's checkpoint of bounded micro-batches: the flow's source positions."""
        return self.directory / "checkpoint"

    @property
    def lease_checkpoint(self) -> Path:
        """Spark's checkpoint of leases: only lease numbers (the positions are on the target)."""
        return self.directory / "lease-checkpoint"

    def _read(self, name: str) -> dict[str, Any]:
        try:
            data = json.loads((self.directory / name).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, name: str, data: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        tmp.replace(self.directory / name)

    @property
    def stop_marker(self) -> Path:
        """While this file exists the planner plans no new batch (a graceful stop)."""
        return self.directory / "stopping"

    @property
    def replan_marker(self) -> Path:
        """While this file exists, running leases end early: the assignment must change (new
        topics or partitions); the planner removes it when it plans the next lease."""
        return self.directory / "replan"

    @property
    def head_start_marker(self) -> Path:
        """While this file exists the driver copies the flow itself, Spark not started yet (see
        engine/head_start.py); it holds the driver's pid."""
        return self.directory / "head-start"

    @property
    def handover_marker(self) -> Path:
        """A leased task asks the head start to stop (and waits for its marker to go)."""
        return self.directory / "handover"

    def control(self) -> FlowControl:
        """What the API changed about the flow while it runs (topics, pause); the planner
        reads it at every lease or batch. An unreadable file counts as no change."""
        try:
            return FlowControl.from_json(self._read("control.json"))
        except ValueError:
            return FlowControl()

    def write_control(self, control: FlowControl) -> None:
        self._write("control.json", control.as_json())

    def refused(self) -> frozenset[str]:
        """Source topics the replication graph check holds back from this flow while it runs
        (a route that would copy them twice or round a cycle; ferry.graph.guard)."""
        return frozenset(str(t) for t in self._read("refused.json").get("topics", ()))

    def write_refused(self, topics: frozenset[str]) -> None:
        self._write("refused.json", {"topics": sorted(topics)})

    def selection_control(self) -> FlowControl:
        """What selects the flow's topics now: the API's override, less the refused topics."""
        control = self.control()
        for topic in self.refused():
            control = control.remove(topic)
        return control

    def lease_topics(self) -> dict[str, int]:
        """The topics (and partition counts) the running lease copies, as the planner wrote."""
        return {str(t): int(n) for t, n in self._read("lease.json").get("topics", {}).items()}

    def lease_planned_at(self) -> float | None:
        """When the planner planned the running lease (wall seconds); None before the first."""
        planned = self._read("lease.json").get("time")
        return float(planned) if isinstance(planned, int | float) else None

    def lease_topic_ids(self) -> dict[str, str]:
        """The source topic ids the running lease was planned with (a topic whose id was not
        known is left out)."""
        return {str(t): str(i) for t, i in self._read("lease.json").get("ids", {}).items() if i}

    def write_lease(
        self, lease: int, topics: dict[str, int], topic_ids: dict[str, str] | None = None
    ) -> None:
        ids = {t: i for t, i in (topic_ids or {}).items() if t in topics and i}
        self._write(
            "lease.json", {"lease": lease, "time": time.time(), "topics": topics, "ids": ids}
        )

    def slots(self) -> int | None:
        """The tasks the flow's leases may run at once now (its share of Spark's live cores),
        as the driver last saw it; None before it looked, or while no executor is there."""
        slots = self._read("slots.json").get("slots")
        return int(slots) if isinstance(slots, int) and slots > 0 else None

    def write_slots(self, slots: int) -> None:
        self._write("slots.json", {"slots": slots, "time": time.time()})

    def task_slots(self) -> int:
        """How many copy-task slots (bins) any plan of this flow has used: exactly-once ids
        are per slot, and a run's start fences every one an earlier run may still write in
        (engine/copy/fencing.py). 0 before any plan."""
        slots = self._read("task-slots.json").get("slots")
        return slots if isinstance(slots, int) and slots > 0 else 0

    def record_task_slots(self, slots: int) -> None:
        """A plan with `slots` bins is about to run: remembered if more than any before
        (written before the plan's tasks start, so a run that dies leaves it behind)."""
        if slots > self.task_slots():
            self._write("task-slots.json", {"slots": slots, "time": time.time()})

    @property
    def notices_file(self) -> Path:
        """Lines the planner and local tasks leave for `ferry run`'s console and events (a
        topic re-created, say): they run in Spark's Python workers, whose output goes to
        Spark's log only."""
        return self.directory / "notices.log"

    def add_notice(self, line: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.notices_file.open("a", encoding="utf-8") as f:
            f.write(line.replace("\n", " ") + "\n")

    def notices_after(self, position: int) -> tuple[list[str], int]:
        """The whole lines added after byte `position`, and the position after them."""
        try:
            with self.notices_file.open("rb") as f:
                f.seek(position)
                data = f.read()
        except FileNotFoundError:
            return [], 0
        complete = data[: data.rfind(b"\n") + 1]
        lines = complete.decode("utf-8", errors="replace").splitlines()
        return lines, position + len(complete)

    def notices_end(self) -> int:
        try:
            return self.notices_file.stat().st_size
        except FileNotFoundError:
            return 0

    @property
    def live_dir(self) -> Path:
        return self.directory / "live"

    def stats(self) -> dict[str, Any]:
        """The counters: committed batches and leases, plus what running leases committed."""
        stats = self._read("stats.json")
        absorbed = set(stats.get("absorbed", ()))
        for name, partitions in self._live().items():
            if name not in absorbed:
                _accumulate(stats, partitions)
        return stats

    def recent_latency_ms(self) -> int | None:
        """Mean replication latency (target ack time minus the record's source timestamp) of
        the running lease's copies so far, or else of the last batch or lease that copied
        anything; None before the first copy. `ferry status` shows it where no heartbeats
        tell the latency (a read-only source emits none)."""
        live = [p for partitions in self._live().values() for p in partitions]
        recent = _merged(live, "latency")
        if not recent.count:
            recent = Histogram.from_json(self._read("stats.json").get("recent_latency"))
        return round(recent.total / recent.count) if recent.count else None

    def stats_signature(self) -> tuple[tuple[str, int, int, int], ...]:
        """What `stats()` reads, as (name, inode, size, modification time) per file: equal
        signatures, equal stats. Several times cheaper to take than `stats()` with thousands of
        partitions, so a caller polling many times a second reads them only when changed."""
        paths = [self.directory / "stats.json", *sorted(self.live_dir.glob("*.json"))]
        signature = []
        for path in paths:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            signature.append((path.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
        return tuple(signature)

    def _live(self) -> dict[str, list[dict[str, Any]]]:
        return {name: list(task.partitions) for name, task in self.running_tasks().items()}

    def running_tasks(self) -> dict[str, TaskReport]:
        """The running lease's tasks' latest reports, by task (attempt) name."""
        live: dict[str, TaskReport] = {}
        for path in sorted(self.live_dir.glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                continue
            if isinstance(data, dict):
                live[path.stem] = TaskReport.from_json(data)
        return live

    def write_live(
        self,
        task: str,
        partitions: list[dict[str, Any]],
        executor: dict[str, str] | None = None,
        began: float = 0.0,
    ) -> None:
        """A leased task's results so far (cumulative; see `partition_entry`), the executor
        it runs on and when it began (wall seconds)."""
        self.live_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.live_dir / f".{task}.tmp"
        report = {"partitions": partitions, "executor": executor or {}, "began": began}
        tmp.write_text(json.dumps(report))
        tmp.replace(self.live_dir / f"{task}.json")

    def write_spark_ui(self, url: str | None) -> None:
        """The address of the running `ferry run`'s Spark UI (None: the UI is off)."""
        self._write("spark-ui.json", {"url": url})

    def spark_ui(self) -> str | None:
        url = self._read("spark-ui.json").get("url")
        return str(url) if url else None

    def executors(self, now: float | None = None) -> dict[str, ExecutorStats]:
        """Which executor copies what, and how fast (see engine/executors.py)."""
        stats = self._read("stats.json")
        running = self.unabsorbed_tasks(stats)
        return summarize(running, stats.get("executors", {}), time.time() if now is None else now)

    def unabsorbed_tasks(self, stats: dict[str, Any] | None = None) -> list[TaskReport]:
        """The reports of the running lease's tasks (those a finished lease took in left out)."""
        stats = self._read("stats.json") if stats is None else stats
        absorbed = set(stats.get("absorbed", ()))
        return [t for name, t in self.running_tasks().items() if name not in absorbed]

    def absorb_leases(
        self, batch_id: int, seconds: float, copiers: list[str], bounds: LeaseBounds
    ) -> None:
        """A lease ended: what its tasks wrote (every attempt, each up to its last commit)
        becomes part of `stats.json`, and their files go. With the previous lease of the same
        run, the gap between them (the previous one's last task ending, this one's first task
        starting: nobody copied then) is recorded: the last, the worst, and the count."""
        reports = self.running_tasks()
        live = {name: list(task.partitions) for name, task in reports.items()}
        stats = self._read("stats.json")
        _accumulate(stats, [p for partitions in live.values() for p in partitions])
        add_totals(stats.setdefault("executors", {}), reports.values())
        self._finish_batch(stats, batch_id, seconds, copiers)
        previous = stats.get("lease")
        if previous and previous.get("run") == bounds.run_id and bounds.began_at:
            gap = max(0.0, bounds.began_at - previous["ended_at"])
            stats["lease_gap_seconds"] = gap
            stats["lease_gap_max_seconds"] = max(gap, stats.get("lease_gap_max_seconds", 0.0))
            stats["lease_gaps"] = stats.get("lease_gaps", 0) + 1
        if bounds.ended_at:
            stats["lease"] = {"run": bounds.run_id, "ended_at": bounds.ended_at}
        stats["absorbed"] = sorted(live)
        self._write("stats.json", stats)
        for name in live:
            (self.live_dir / f"{name}.json").unlink(missing_ok=True)

    def latest(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._read("latest.json").get("offsets", {}).items()}

    def write_latest(self, offsets: dict[str, int]) -> None:
        self._write("latest.json", {"time": time.time(), "offsets": offsets})

    def add_batch(
        self,
        batch_id: int,
        partitions: list[dict[str, Any]],
        seconds: float,
        copiers: list[str] | None = None,
        tasks: list[TaskReport] | None = None,
    ) -> None:
        """`copiers`: the copy loops the batch's tasks ran (native, python); `tasks`: what each
        copied on which executor (leases: `absorb_leases`)."""
        stats = self._read("stats.json")
        _accumulate(stats, partitions)
        add_totals(stats.setdefault("executors", {}), tasks or [])
        self._finish_batch(stats, batch_id, seconds, copiers or [])
        self._write("stats.json", stats)

    @staticmethod
    def _finish_batch(
        stats: dict[str, Any], batch_id: int, seconds: float, copiers: list[str]
    ) -> None:
        if copiers:
            stats["copier"] = ",".join(copiers)
        stats["batches"] = stats.get("batches", 0) + 1
        stats["last_batch"] = batch_id
        stats["busy_seconds"] = stats.get("busy_seconds", 0.0) + seconds
        stats["last_batch_seconds"] = seconds
        stats["time"] = time.time()

    def record_bytes(self) -> dict[tuple[str, int], float]:
        """Average bytes per record copied so far, per partition (admission control, bins)."""
        sizes: dict[tuple[str, int], float] = {}
        for key, entry in self.stats().get("partitions", {}).items():
            topic, _, partition = key.rpartition(":")
            if entry.get("records"):
                sizes[(topic, int(partition))] = entry["bytes"] / entry["records"]
        return sizes

    def partition_lags(self, stats: dict[str, Any] | None = None) -> dict[str, int]:
        """Per `topic:partition`, records on the source not yet copied (approximate: the
        planner's last look at the source against the last committed batch). `stats`: an
        already read `stats()`, to read the file once."""
        stats = self.stats() if stats is None else stats
        positions = {k: v.get("position", 0) for k, v in stats.get("partitions", {}).items()}
        return {k: max(0, end - positions.get(k, 0)) for k, end in self.latest().items()}

    def lag(self, stats: dict[str, Any] | None = None) -> int:
        """Records available on the source and not yet copied (as of the planner's last look)."""
        return sum(self.partition_lags(stats).values())


def partition_entry(result: Any) -> dict[str, Any]:
    """A copy loop's PartitionResult as `add_batch` and `write_live` take it.

    An empty histogram is left out: a task writes its report after every slice and the driver
    reads every report several times a second, and with thousands of idle partitions their
    empty buckets were most of both."""
    entry = {
        "topic": result.topic,
        "partition": result.partition,
        "end": result.end,
        "copied": result.copied,
        "skipped": result.skipped,
        "bytes": result.bytes,
        "expired": result.expired,
    }
    if getattr(result, "lost_first", -1) >= 0:
        entry["lost"] = [result.lost_first, result.lost_last]
    for name in ("schema_translated", "schema_unchanged", "held"):
        if getattr(result, name, 0):
            entry[name] = getattr(result, name)
    for name in ("latency", "record_age"):
        histogram = getattr(result, name)
        if histogram.count:
            entry[name] = histogram.to_json()
    return entry


def _merged(partitions: list[dict[str, Any]], name: str) -> Histogram:
    merged = Histogram()
    for p in partitions:
        if name in p:
            merged.add(Histogram.from_json(p[name]))
    return merged


def _accumulate(stats: dict[str, Any], partitions: list[dict[str, Any]]) -> None:
    recent = Histogram()  # these copies' latency, each partition's histogram read once below
    per = stats.setdefault("partitions", {})
    for p in partitions:
        entry = per.setdefault(tp_key(p["topic"], p["partition"]), {"records": 0, "bytes": 0})
        entry["records"] += p["copied"]
        entry["bytes"] += p["bytes"]
        if p["end"] >= 0:
            entry["position"] = max(p["end"], entry.get("position", 0))
        for name in ("schema_translated", "schema_unchanged"):
            if p.get(name):
                entry[name] = entry.get(name, 0) + p[name]
        if p.get("expired"):
            entry["expired"] = entry.get("expired", 0) + p["expired"]
            if "lost" in p:
                entry["lost"] = _add_lost(entry.get("lost", []), p["lost"], p["expired"])
        for name in ("latency", "record_age"):
            if name in p:
                added = Histogram.from_json(p[name])
                histogram = Histogram.from_json(entry.get(name))
                histogram.add(added)
                entry[name] = histogram.to_json()
                if name == "latency":
                    recent.add(added)
    if recent.count:
        # The latest batch's or lease's copies: what `recent_latency_ms` reads once it ended.
        stats["recent_latency"] = recent.to_json()
    stats["records"] = stats.get("records", 0) + sum(p["copied"] for p in partitions)
    stats["skipped"] = stats.get("skipped", 0) + sum(p["skipped"] for p in partitions)
    stats["bytes"] = stats.get("bytes", 0) + sum(p["bytes"] for p in partitions)
    stats["expired"] = stats.get("expired", 0) + sum(p.get("expired", 0) for p in partitions)


# The lost offset ranges kept per partition (the newest; older ones merge into the first).
LOST_RANGES_KEPT = 20


def _add_lost(ranges: list[list[int]], lost: list[int], count: int) -> list[list[int]]:
    """`ranges` ([first, last, records] each, oldest first) with `lost` ([first, last] of
    `count` records the source deleted before ferry copied them) added: joined to the newest
    range when they touch or overlap, and at most LOST_RANGES_KEPT ranges kept."""
    first, last = lost
    out = [list(r) for r in ranges]
    if out and first <= out[-1][1] + 1:
        newest = out[-1]
        out[-1] = [min(newest[0], first), max(newest[1], last), newest[2] + count]
    else:
        out.append([first, last, count])
    while len(out) > LOST_RANGES_KEPT:
        a, b = out.pop(0), out[0]
        out[0] = [a[0], b[1], a[2] + b[2]]
    return out


def lost_ranges(entry: dict[str, Any]) -> str:
    """A partition entry's lost offsets as text: `100..149`, `100..149, 300..310`; "" none."""
    return ", ".join(
        f"{first}..{last}" if first != last else str(first)
        for first, last, _ in entry.get("lost", [])
    )
