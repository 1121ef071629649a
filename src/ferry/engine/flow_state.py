"""A flow's small on-disk state besides Spark's checkpoint: counters and the latest offsets.

The sink's commit (after the target acked a batch) adds the batch to `stats.json`; the planner
writes the source's latest offsets to `latest.json`. The planner reads record sizes back for
admission control; `ferry run` reads both for its progress view and summary. Losing these
files loses no data: they are statistics, rewritten atomically.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ferry.engine.latency import Histogram

__all__ = ["FlowState", "tp_key"]


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class FlowState:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @property
    def checkpoint(self) -> Path:
        return self.directory / "checkpoint"

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

    def stats(self) -> dict[str, Any]:
        return self._read("stats.json")

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
    ) -> None:
        """`copiers`: the copy loops the batch's tasks ran (native, python)."""
        stats = self.stats()
        if copiers:
            stats["copier"] = ",".join(copiers)
        per = stats.setdefault("partitions", {})
        for p in partitions:
            entry = per.setdefault(tp_key(p["topic"], p["partition"]), {"records": 0, "bytes": 0})
            entry["records"] += p["copied"]
            entry["bytes"] += p["bytes"]
            entry["position"] = p["end"]
            if p.get("expired"):
                entry["expired"] = entry.get("expired", 0) + p["expired"]
            for name in ("latency", "record_age"):
                if name in p:
                    histogram = Histogram.from_json(entry.get(name))
                    histogram.add(Histogram.from_json(p[name]))
                    entry[name] = histogram.to_json()
        stats["batches"] = stats.get("batches", 0) + 1
        stats["last_batch"] = batch_id
        stats["records"] = stats.get("records", 0) + sum(p["copied"] for p in partitions)
        stats["skipped"] = stats.get("skipped", 0) + sum(p["skipped"] for p in partitions)
        stats["bytes"] = stats.get("bytes", 0) + sum(p["bytes"] for p in partitions)
        stats["expired"] = stats.get("expired", 0) + sum(p.get("expired", 0) for p in partitions)
        stats["busy_seconds"] = stats.get("busy_seconds", 0.0) + seconds
        stats["last_batch_seconds"] = seconds
        stats["time"] = time.time()
        self._write("stats.json", stats)

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
