"""Fixed-bucket histograms of milliseconds, cheap enough to fill once per copied record.

Pure code. MM2 reports `replication-latency-ms` (the target's ack time minus the record's
timestamp) and `record-age-ms` (consume time minus the record's timestamp) per partition.
Tasks fill these histograms, the sink's commit adds them to the flow's stats, and the metrics
endpoint exposes them as Prometheus histograms (cumulative buckets, `le` in milliseconds).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUCKETS_MS", "Histogram"]

BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000)


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_MS) + 1))
    total: float = 0.0  # sum of observations, ms

    def observe(self, ms: float) -> None:
        # bisect_left: a value equal to a bound counts in that bucket (Prometheus `le`).
        self.counts[bisect_left(BUCKETS_MS, ms)] += 1
        self.total += ms

    @property
    def count(self) -> int:
        return sum(self.counts)

    def add(self, other: Histogram) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.total += other.total

    def to_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "sum": self.total}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Histogram:
        if not data:
            return cls()
        return cls(list(data["counts"]), float(data["sum"]))

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: (upper bound, observations at or below it), +Inf last."""
        out, running = [], 0
        for bound, count in zip([*map(str, BUCKETS_MS), "+Inf"], self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out
