"""Planning a micro-batch: how much to copy (admission control) and who copies it (bins).

Pure code, no I/O. A partition is identified by `(topic, partition)`; offsets are "next offset"
positions, so a partition's lag is `latest - start`.

Admission control: when the available data exceeds a batch's caps, every lagging partition
gets a share proportional to its lag (and at least one record), so a hot partition cannot
starve the others and the batch stays bounded in records and estimated bytes.

Bins: Spark pays a fixed cost per task (tens of milliseconds for a Python task), so a batch is
packed into a few bins, about one per core, balanced by estimated bytes; a small batch (under
MIN_BIN_BYTES per bin) gets fewer bins, down to one. Bins are sticky: a partition stays in the
bin it was in last batch while that bin is not overloaded, which keeps Python workers' cached
clients warm for the partitions they already fetch.

Exactly-once plans (leases and batches) bin by name instead (`bins_by_name`): a partition's bin
is a function of the partition and the bin count alone, so that every run of a flow puts it in
the same bin.
"""

from __future__ import annotations

import heapq
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter

__all__ = [
    "DEFAULT_RECORD_BYTES",
    "EARLIEST",
    "MIN_BIN_BYTES",
    "TP",
    "PartitionRange",
    "admit",
    "bin_count",
    "bins_by_name",
    "pack_bins",
    "range_start",
]

from ferry.engine.copy.types import EARLIEST

TP = tuple[str, int]
DEFAULT_RECORD_BYTES = 1024.0  # estimate for a partition nothing has been copied from yet
# A bin copies at least this many estimated bytes before the batch gets another: splitting
# less across tasks costs more in per-task overhead (and CPU) than the parallel copy saves.
# 16 MiB is about half a second of copying in one Python task.
MIN_BIN_BYTES = 16 * 1024 * 1024


def range_start(start: int | None, end: int) -> int | None:
    """Where a batch's range of one partition starts, given the batch's start and end offsets.

    None: nothing to copy. A partition the batch did not start with is new, and an end below
    the start means the partition was recreated (or truncated): both are copied from their
    earliest retained record, whatever offset that is by the time the task runs. Deciding
    from (start, end) alone keeps a replayed batch identical to the original one.
    """
    if start is None or end < start:
        return EARLIEST if end > 0 else None
    return start if end > start else None


@dataclass(frozen=True)
class PartitionRange:
    """Copy source offsets `[start, end)` of `topic`/`partition` into `remote_topic`."""

    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)

    @property
    def count(self) -> int:
        return self.end - max(0, self.start)  # start < 0: "the earliest retained offset"


def admit(
    start: Mapping[TP, int],
    latest: Mapping[TP, int],
    *,
    max_records: int | None,
    max_bytes: int | None,
    record_bytes: Mapping[TP, float],
) -> dict[TP, int]:
    """End offsets for the next batch: `latest`, cut down to the caps in proportion to lag.

    Never returns an end below `start` (progress never goes backwards) nor above `latest`.
    """
    lag = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total_records = sum(lag.values())
    total_bytes = sum(n * record_bytes.get(tp, DEFAULT_RECORD_BYTES) for tp, n in lag.items())
    scale = 1.0
    if max_records is not None and total_records > max_records:
        scale = min(scale, max_records / total_records)
    if max_bytes is not None and total_bytes > max_bytes:
        scale = min(scale, max_bytes / total_bytes)
    ends: dict[TP, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        if lag[tp] == 0 or scale >= 1.0:
            ends[tp] = max(begin, end)
        else:
            ends[tp] = begin + max(1, int(lag[tp] * scale))
    return ends


def bin_count(
    ranges: list[PartitionRange],
    max_bins: int,
    *,
    record_bytes: Mapping[TP, float],
    min_bin_bytes: float = MIN_BIN_BYTES,
) -> int:
    """Bins for a batch: one per `min_bin_bytes` of estimated bytes, at least 1, at most
    `max_bins`."""
    total = sum(
        r.count * record_bytes.get(r.tp, DEFAULT_RECORD_BYTES) for r in ranges if r.count > 0
    )
    return max(1, min(max_bins, math.ceil(total / min_bin_bytes)))


def lease_bins(configured: int, at_start: int, slots: int | None) -> int:
    """Bins for a lease: `ferry.bins` when set, else the flow's share of Spark's task slots
    now (`at_start`, its share when the run started, until the driver has counted them), and
    never more than those slots. A lease holds its slot for the whole lease, so a bin beyond
    the slots would wait a whole lease, its partitions queued behind the others (after a
    worker is lost, say); fewer bins copy every partition at once."""
    if slots is None:
        return max(1, configured or at_start)
    return max(1, min(configured or slots, slots))


def pack_bins(
    ranges: list[PartitionRange],
    bins: int,
    *,
    record_bytes: Mapping[TP, float],
    previous: Mapping[TP, int] | None = None,
    slack: float = 0.25,
    spread: bool = False,
) -> list[list[PartitionRange]]:
    """Pack non-empty ranges into at most `bins` bins balanced by estimated bytes.

    A bin's index is its identity across batches (for stickiness); a bin may be empty.

    Sticky first: a range goes back to its previous bin while that bin stays within
    `(1 + slack)` of the ideal load. The rest go, largest first, to the lightest bin (LPT), so
    no bin exceeds the ideal load by more than `slack` plus one range.

    `spread` (leases): the rest go, largest first, to the bin with the fewest ranges among
    those that stay within `(1 + slack)` of the ideal with it, else to the lightest. A lease
    is weighed by its partitions' lags at its start but lasts minutes: LPT would put every
    partition with little lag (live traffic beside a backlog) into the one or two bins whose
    backlog is a little lighter, for the whole lease. Spread, they get a task each where the
    loads allow, and a task's consumer fetches fewer partitions (across a link its answers
    are shorter). Same bound as LPT. A scan of the bins per range: a lease is planned once
    per lease, not per batch.
    """
    work = [r for r in ranges if r.count > 0]
    if not work:
        return []
    bins = max(1, min(bins, len(work)))
    # Each weight once, and the lightest bin from a heap of (load, index): a scan of every
    # bin for every range was partitions x bins steps (10,000 x 64 on a cluster's slots).
    weights = [r.count * record_bytes.get(r.tp, DEFAULT_RECORD_BYTES) for r in work]
    ideal = sum(weights) / bins
    limit = ideal * (1 + slack)  # where a bin stops taking ranges back (and spread ones)
    loads = [0.0] * bins
    packed: list[list[PartitionRange]] = [[] for _ in range(bins)]
    rest: list[tuple[float, PartitionRange]] = []
    homes = previous or {}
    for w, r in sorted(zip(weights, work, strict=True), key=itemgetter(0), reverse=True):
        home = homes.get((r.topic, r.partition))
        if home is not None and home < bins and loads[home] + w <= limit:
            packed[home].append(r)
            loads[home] += w
        else:
            rest.append((w, r))
    if spread:
        for w, r in rest:
            roomy = [i for i in range(bins) if loads[i] + w <= limit]
            if roomy:
                index = min(roomy, key=lambda i: (len(packed[i]), loads[i], i))
            else:
                index = min(range(bins), key=lambda i: (loads[i], i))
            packed[index].append(r)
            loads[index] += w
        return packed
    lightest = [(load, index) for index, load in enumerate(loads)]
    heapq.heapify(lightest)  # ties: the lowest index, as min() over the bins in order
    for w, r in rest:
        load, index = lightest[0]
        packed[index].append(r)
        heapq.heapreplace(lightest, (load + w, index))
    return packed


def bins_by_name(ranges: list[PartitionRange], bins: int) -> list[list[PartitionRange]]:
    """Non-empty ranges in `bins` bins by name alone, empty bins kept: a topic's partitions go
    round the bins from a place its name hashes to, so a partition's bin is the same in every
    plan with as many bins, whoever plans it and whatever the loads.

    Exactly-once leases need that: a bin's index names the transactional ids that write its
    partitions, and a partition written under two ids is written by two writers neither
    fences. Two runs of one flow (a paused one woken beside the run that took over) plan
    independently; packed by load, they could put a partition in different bins and both
    copy it from the same committed position."""
    packed: list[list[PartitionRange]] = [[] for _ in range(max(1, bins))]
    for r in ranges:
        if r.count > 0:
            packed[(zlib.crc32(r.topic.encode()) + r.partition) % len(packed)].append(r)
    return packed
