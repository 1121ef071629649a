"""Pure helpers of the benchmark: percentiles, medians, rates (no I/O, unit-tested)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

MB = 1e6  # bytes: rates are MB/s of key + value bytes


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values: the smallest value with at least
    `fraction` of all values at or below it. `fraction` in (0, 1]."""
    if not sorted_values:
        raise ValueError("no values")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} is not in (0, 1]")
    rank = math.ceil(fraction * len(sorted_values))
    return float(sorted_values[max(1, rank) - 1])


def median(values: Iterable[float | None]) -> float | None:
    """Median of the values that are not None; None when there are none."""
    present = [float(v) for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def latency_summary(latencies_ms: Iterable[float]) -> dict[str, float | int]:
    """p50, p90, p99, p99.9 and max of latencies in milliseconds, and how many there were."""
    ordered = sorted(latencies_ms)
    if not ordered:
        raise ValueError("no latencies")
    return {
        "count": len(ordered),
        "p50_ms": percentile(ordered, 0.50),
        "p90_ms": percentile(ordered, 0.90),
        "p99_ms": percentile(ordered, 0.99),
        "p999_ms": percentile(ordered, 0.999),
        "max_ms": ordered[-1],
    }


def cpu_share(cpu_seconds: float, wall_seconds: float) -> float:
    """CPU seconds per wall second over a window: 1.0 is one core busy all the time."""
    if wall_seconds <= 0:
        raise ValueError(f"window of {wall_seconds} s")
    return cpu_seconds / wall_seconds


def median_rows(
    runs: Mapping[str, Sequence[Mapping[str, float]]], columns: Sequence[tuple[str, str]]
) -> list[str]:
    """A markdown table row per name in `runs`: for each (key, format) column, the median of
    that key over the name's runs, formatted."""
    rows = []
    for name, measured in runs.items():
        cells = [fmt.format(statistics.median(r[key] for r in measured)) for key, fmt in columns]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows
