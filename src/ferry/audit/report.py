"""The audit's outputs: the JSON document, the terminal table and the per-bucket chart."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ferry.audit.model import TopicResult

__all__ = ["chart", "completeness", "has_missing", "table_rows", "to_json"]

COUNTS = ("source", "copied", "missing", "duplicated", "foreign", "expired", "in_flight")


def completeness(topic: TopicResult) -> float:
    """Share of the source records due on the target (all but those in flight) that are
    there; 100 when none is due."""
    due = topic.source - topic.in_flight
    return 100.0 if due <= 0 else 100.0 * (due - topic.missing) / due


def has_missing(flows: Mapping[str, Sequence[TopicResult]]) -> bool:
    return any(t.missing for topics in flows.values() for t in topics)


def to_json(flows: Mapping[str, Sequence[TopicResult]], bucket_ms: int) -> dict[str, Any]:
    document: dict[str, Any] = {"bucket_ms": bucket_ms, "flows": {}}
    for name, topics in flows.items():
        document["flows"][name] = {
            "missing": sum(t.missing for t in topics),
            "duplicated": sum(t.duplicated for t in topics),
            "topics": {
                t.topic: {
                    "remote_topic": t.remote_topic,
                    **{k: getattr(t, k) for k in COUNTS},
                    "copies": t.copies,
                    "completeness": round(completeness(t), 4),
                    "delay_p50_ms": t.delay_p50_ms,
                    "delay_p99_ms": t.delay_p99_ms,
                    "missing_ranges": t.missing_ranges,
                    "duplicated_ranges": t.duplicated_ranges,
                    "foreign_ranges": t.foreign_ranges,
                    "ranges_truncated": t.ranges_truncated,
                    "buckets": [
                        {"start_ms": start, **counts} for start, counts in sorted(t.buckets.items())
                    ],
                }
                for t in topics
            },
        }
    return document


def table_rows(topics: Sequence[TopicResult]) -> list[list[str]]:
    """One row per topic: topic, then COUNTS, then completeness, then the replication delay
    (p50 / p99; "-" where the remote topic does not record append times)."""
    return [
        [t.topic, *(f"{getattr(t, k):,}" for k in COUNTS), f"{completeness(t):.2f}%", _delay(t)]
        for t in topics
    ]


def _delay(topic: TopicResult) -> str:
    if topic.delay_p50_ms is None or topic.delay_p99_ms is None:
        return "-"
    return f"{topic.delay_p50_ms / 1000:,.1f} s / {topic.delay_p99_ms / 1000:,.1f} s"


def chart(flows: Mapping[str, Sequence[TopicResult]], bucket_ms: int, path: Path) -> None:
    """Counts per bucket on both tiers, one panel per flow and topic; missing records in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, t) for name, topics in flows.items() for t in topics]
    rows = max(1, len(panels))
    figure, axes = plt.subplots(rows, 1, figsize=(10, 3 * rows), squeeze=False)
    for axis, (name, topic) in zip(axes[:, 0], panels, strict=False):
        starts = sorted(topic.buckets)
        x = list(range(len(starts)))
        labels = [_clock(s) for s in starts]
        source = [topic.buckets[s]["source"] for s in starts]
        target = [topic.buckets[s]["target"] for s in starts]
        missing = [topic.buckets[s]["missing"] for s in starts]
        axis.bar([i - 0.2 for i in x], source, width=0.4, label="source", color="#4c72b0")
        axis.bar([i + 0.2 for i in x], target, width=0.4, label="target", color="#55a868")
        axis.bar(x, missing, width=0.8, label="missing", color="#c44e52")
        axis.set_xticks(x, labels, rotation=45, ha="right", fontsize=7)
        axis.set_title(f"{name}  {topic.topic} -> {topic.remote_topic}", fontsize=9)
        axis.set_ylabel(f"records per {bucket_ms // 1000} s")
        axis.legend(fontsize=7, loc="upper left")
        p99 = [topic.buckets[s].get("delay_p99_ms") for s in starts]
        if any(v is not None for v in p99):
            delay_axis = axis.twinx()
            delay_axis.plot(
                x,
                [float("nan") if v is None else v / 1000 for v in p99],
                color="#8172b2",
                marker=".",
                label="delay p99",
            )
            delay_axis.set_ylabel("replication delay p99 (s)")
            delay_axis.legend(fontsize=7, loc="upper right")
    if not panels:
        axes[0, 0].set_title("no topics audited")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _clock(start_ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(start_ms / 1000, tz=dt.UTC).strftime("%m-%d %H:%M:%S")
