"""Planning a lease: what each partition will likely carry in it, and which bin copies it.

Pure code, no I/O: the planner (engine/spark/source.py) reads the source's ends, the flow's
positions on the target and the counters once per lease, and hands them here. With 10,000
partitions every step below is one pass over them; reading either cluster a second time, or
the counters twice, would cost more than all of this.

A partition's weight is what it carried since the last plan plus its lag now, plus one, so
an idle partition still counts and one catching up gets a bin of its own from the first lease
of a run on, when nothing was carried yet.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ferry.engine.copy.types import EARLIEST, OPEN
from ferry.engine.plan.batches import TP, PartitionRange, bins_by_name, pack_bins
from ferry.engine.plan.remote_topics import DEFAULT_MAX_MESSAGE_BYTES

__all__ = ["Counters", "lags", "lease_rows", "lease_weights", "read_counters"]

Row = tuple[Any, ...]


@dataclass(frozen=True)
class Counters:
    """The flow's counters per partition, from one read of its stats: records copied so far,
    and average bytes per record (for partitions that copied any)."""

    records: dict[TP, int]
    record_bytes: dict[TP, float]


def read_counters(partitions: Mapping[str, Mapping[str, Any]]) -> Counters:
    """`partitions`: the stats' `partitions` (`topic:partition` -> its counters)."""
    records: dict[TP, int] = {}
    sizes: dict[TP, float] = {}
    for key, entry in partitions.items():
        topic, _, partition = key.rpartition(":")
        tp = (topic, int(partition))
        copied = int(entry.get("records", 0))
        records[tp] = copied
        if copied:
            sizes[tp] = entry["bytes"] / copied
    return Counters(records, sizes)


def lags(ends: Mapping[TP, int], positions: Mapping[TP, int]) -> dict[TP, int]:
    """Records on the source not yet copied: its end minus the flow's position (none yet:
    everything since 0; a negative offset, "no commit", counts as 0)."""
    return {tp: max(0, end - max(0, positions.get(tp, 0))) for tp, end in ends.items()}


def lease_weights(
    records: Mapping[TP, int], carried: dict[TP, int], lag: Mapping[TP, int]
) -> dict[TP, int]:
    """Each partition's weight for the next lease: 1 + records since the last plan + lag.

    `records`: counted so far; `carried`: as counted at the last plan, updated here to
    `records` (so the next plan counts from now)."""
    since = {tp: n - carried.get(tp, 0) for tp, n in records.items()}
    carried.update(records)
    return {tp: 1 + since.get(tp, 0) + lag.get(tp, 0) for tp in {*since, *lag}}


def lease_rows(
    topics: Mapping[str, int],
    weights: Mapping[TP, int],
    bins: int,
    *,
    remote_topic: Callable[[str], str],
    max_message_bytes: Mapping[str, int],
    log_ends: Mapping[TP, int],
    cluster_ids: tuple[str, str],
    record_bytes: Mapping[TP, float],
    previous: dict[TP, int],
    topic_ids: Mapping[str, str] | None = None,
    by_name: bool = False,
) -> list[list[Row]]:
    """Every partition of `topics`, packed into at most `bins` bins (sticky: `previous`,
    updated here), as rows of the planner's RANGE_SCHEMA: copy from the flow's position
    (EARLIEST) on, with no end (OPEN). Empty bins are left out; a row's bin is its list's
    index in the answer. `by_name` (exactly-once): each partition in the bin its name gives
    (`bins_by_name`), empty bins kept, so the index is the same in every run's plan. A topic
    `max_message_bytes` does not name gets Kafka's default; one `topic_ids` does not name, an
    unknown id ("")."""
    remote = {t: remote_topic(t) for t in topics}
    ranges = [
        PartitionRange(t, p, 0, weights.get((t, p), 1), remote[t])
        for t, count in sorted(topics.items())
        for p in range(count)
    ]
    source_id, target_id = cluster_ids
    packed: list[list[Row]] = []
    bins_of = (
        bins_by_name(ranges, bins)
        if by_name
        else pack_bins(ranges, bins, record_bytes=record_bytes, previous=previous, spread=True)
    )
    for bin_ranges in bins_of:
        rows: list[Row] = []
        for r in bin_ranges:
            tp = (r.topic, r.partition)
            previous[tp] = len(packed)
            limit = max_message_bytes.get(r.topic, DEFAULT_MAX_MESSAGE_BYTES)
            end = log_ends.get(tp, -1)
            rows.append(
                (
                    r.topic,
                    r.partition,
                    EARLIEST,
                    OPEN,
                    r.remote_topic,
                    limit,
                    source_id,
                    target_id,
                    end,
                    (topic_ids or {}).get(r.topic, ""),
                )
            )
        if rows or by_name:
            packed.append(rows)
    return packed
