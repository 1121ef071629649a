"""The last hour of each flow, for the console's charts: a bounded ring of samples per flow.

Pure code. A sample is what the flow's counters said at one moment (lag, records and bytes
copied, the latency histogram's sum and count, all since the flow began); the chart points are
the differences between neighbouring samples, so throughput and latency are those of each
interval, not means over the flow's whole life. A counter that went backwards (the flow's
state directory was reset) gives no rate for that interval rather than a negative one.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["History", "Sample"]


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the epoch
    lag: int | None
    records: int
    bytes: int
    latency_sum_ms: float
    latency_count: int


class History:
    def __init__(self, window_seconds: float = 3600.0, interval_seconds: float = 5.0) -> None:
        self.window_seconds = window_seconds
        self.interval_seconds = interval_seconds
        self._capacity = int(window_seconds / interval_seconds) + 1
        self._rings: dict[str, deque[Sample]] = {}

    def add(self, flow: str, sample: Sample) -> None:
        ring = self._rings.setdefault(flow, deque(maxlen=self._capacity))
        ring.append(sample)

    def samples(self, flow: str, now: float) -> list[Sample]:
        """The flow's samples of the last `window_seconds` before `now`, oldest first."""
        since = now - self.window_seconds
        # list() of a deque is one C call under the GIL: a whole copy beside the sampler's
        # appends from its own thread.
        return [s for s in list(self._rings.get(flow, ())) if s.at >= since]

    def points(self, flow: str, now: float) -> list[dict[str, Any]]:
        """One point per sample: its time and lag, and the rates and mean latency of the
        interval it ends (None for the first sample, which ends no interval)."""
        samples = self.samples(flow, now)
        points = []
        for before, sample in zip([None, *samples], samples, strict=False):
            points.append({"t": sample.at, "lag": sample.lag, **_rates(before, sample)})
        return points


def _rates(before: Sample | None, after: Sample) -> dict[str, float | None]:
    none: dict[str, float | None] = {
        "records_per_second": None,
        "bytes_per_second": None,
        "latency_ms": None,
    }
    if before is None or after.at <= before.at:
        return none
    seconds = after.at - before.at
    records, size = after.records - before.records, after.bytes - before.bytes
    count = after.latency_count - before.latency_count
    if records < 0 or size < 0 or count < 0:
        return none
    latency = (after.latency_sum_ms - before.latency_sum_ms) / count if count else None
    return {
        "records_per_second": round(records / seconds, 1),
        "bytes_per_second": round(size / seconds, 1),
        "latency_ms": round(latency, 1) if latency is not None else None,
    }
