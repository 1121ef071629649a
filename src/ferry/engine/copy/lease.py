"""A lease: one Spark task copies its bin of partitions continuously, then hands back.

Continuous `ferry run` turns each Spark micro-batch into a lease of `ferry.lease.seconds`.
Spark still plans, places and retries the work; inside a lease a task never waits for Spark:
it copies what arrives (poll, produce, delivery reports) in *slices* of
`ferry.commit.interval.ms`. After each slice the task commits on the target what the target
acknowledged (the native loop lets the copies in flight carry over into the next slice, so
copying never waits for a round trip; the Python loop waits for them; the lease's last slice
always does):

- at-least-once: the slice's exact offset runs to `ferry-offset-runs.<source>.internal`, and
  once the target acknowledged them, the flow's position, the next source offset per
  partition, as the remote partitions' offsets of group `ferry-<source>-to-<target>`
  (`progress.LeaseCommitter`; the lease's end waits for both);
- exactly-once: one transaction per source partition per slice holds the copies, the runs and
  the position (`send_offsets_to_transaction`); the producers are started afresh at the
  lease's start, which fences every earlier writer of those partitions.

So the position in the target never runs ahead of what the target holds, and a task Spark
retries (on any executor) or the next lease resumes from it: at-least-once copies at most one
slice again after a crash, exactly-once nothing. The lease ends when its time is up, when
`ferry run` is stopping (`stop_requested`), or at the first error (the task fails; Spark or
ferry's runner retries it).

No PySpark here: the sink (engine/spark/sink.py) gives `run_lease` the copy loop and the two
commit steps as functions, so this module is the order of things and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ferry.engine.copy.types import EARLIEST, OPEN, CopyRange, PartitionResult, Slice

__all__ = [
    "LeaseTerms",
    "run_lease",
    "start_positions",
    "with_source_ids",
]

TP = tuple[str, int]
# The slice that ends a lease: long enough to hand over what was fetched, then the acks.
SETTLE_SECONDS = 0.001
# At-least-once, a crash copies again what was copied since the last commit. Catching up on
# a backlog (the first slice of a lease, or a slice that copied this many records or more),
# a commit interval is a backlog's worth, so such slices are kept short.
CATCH_UP_RECORDS = 10_000
CATCH_UP_SLICE_SECONDS = 0.1
CopySlice = Callable[[list[CopyRange], Slice], list[PartitionResult]]


@dataclass(frozen=True)
class LeaseTerms:
    seconds: float  # how long the lease runs
    commit_interval: float  # seconds per slice: copies are acknowledged and committed after each
    stop_requested: Callable[[], bool] = lambda: False
    # after each commit: the lease's results so far (the driver's live counters)
    committed: Callable[[list[PartitionResult]], None] = lambda _results: None
    # short slices while catching up (at-least-once; exactly-once copies nothing twice)
    short_catch_up_slices: bool = False


def start_positions(
    ranges: list[CopyRange],
    committed: Mapping[TP, tuple[int, str]],
    log_ends: dict[TP, int],
    source_ends: Callable[[list[TP]], dict[TP, int]],
) -> tuple[dict[TP, int], list[str]]:
    """Where each partition's copy starts: the flow's committed position on the target
    (`committed`: position and the source topic id committed beside it, by remote partition).

    A partition with none starts at its earliest retained record. A position committed in
    another topic of the same name (its id differs from the range's) or beyond the source's
    end means the topic was deleted and created again: the new one is copied from its start,
    and said (the second value: one sentence per such partition).

    The planner sets such positions back before the lease (engine/plan/topic_ids.py); the
    check here is where the position is read, so one the planner could not reset (the target
    did not answer it then, or a transaction of the old topic committed after it) is never
    resumed: that would skip the new topic's first records, and the new id committed beside
    the position would hide the skip for ever.

    `log_ends` are the ends seen when the lease was planned; an attempt Spark retries, or a
    lease replayed after a restart, may find positions committed since, beyond them. So a
    position beyond its planned end is checked against the source's end now
    (`source_ends(partitions)`, asked after the positions were read): only a position beyond
    that is a recreated topic."""
    positions: dict[TP, int] = {}
    beyond: dict[TP, int] = {}
    notices: list[str] = []
    for r in ranges:
        tp = (r.topic, r.partition)
        position, committed_id = committed.get((r.remote_topic, r.partition), (-1, ""))
        end = log_ends.get(tp)
        if position < 0:
            positions[tp] = EARLIEST
        elif committed_id and r.topic_id and committed_id != r.topic_id:
            notices.append(
                f"{r.topic} partition {r.partition}: ferry's position {position} is in topic id "
                f"{committed_id}, the topic's id is {r.topic_id} now: deleted and re-created; "
                "copying it from its start"
            )
            positions[tp] = EARLIEST
        else:
            positions[tp] = position
            if end is not None and position > end:
                beyond[tp] = position
    now = source_ends(sorted(beyond)) if beyond else {}
    for tp, position in sorted(beyond.items()):
        end = now.get(tp)
        if end is not None and position > end:
            notices.append(
                f"{tp[0]} partition {tp[1]} ends at {end}, below ferry's position "
                f"{position}: recreated? copying it from its start"
            )
            positions[tp] = EARLIEST
    return positions, notices


def with_source_ids(ranges: list[CopyRange], ids: Mapping[str, str]) -> list[CopyRange]:
    """Each range with its topic's id as the source gives it now (`ids`, by topic), where it
    gave one: a task Spark retries, or a lease replayed after a restart, copies with the
    plan's ranges, whose ids may be those of a topic deleted since."""
    return [replace(r, topic_id=ids[r.topic]) if ids.get(r.topic) else r for r in ranges]


def run_lease(
    ranges: list[CopyRange],
    positions: dict[TP, int],
    terms: LeaseTerms,
    copy_slice: CopySlice,
    commit: Callable[[list[PartitionResult]], None],
) -> list[PartitionResult]:
    """Copy `ranges` (their ends are ignored: OPEN) from `positions` until the lease is over.

    `copy_slice(ranges, slice)` copies for one slice and returns (each result's `end`: where
    its partition got to among acknowledged copies, its `in_flight`: copies not acknowledged
    yet); `commit(results)` makes that the flow's position on the target. Returns one result
    per partition for the whole lease: start, end, counts and histograms (runs committed)."""
    began = time.monotonic()
    totals = {
        tp: PartitionResult(r.topic, r.partition, positions[tp], positions[tp], topic_id=r.topic_id)
        for r in ranges
        if (tp := (r.topic, r.partition))
    }
    in_flight: dict[TP, int] = {}
    continuing = settled = False
    last_copied = 0
    while not settled:
        left = terms.seconds - (time.monotonic() - began)
        if left <= 0 or terms.stop_requested():
            if not continuing:
                break
            # The lease's last slice: its copies acknowledged, so its end is committed.
            left, settled = SETTLE_SECONDS, True
        work = [replace(r, start=positions[(r.topic, r.partition)], end=OPEN) for r in ranges]
        interval = terms.commit_interval
        if terms.short_catch_up_slices and (not continuing or last_copied >= CATCH_UP_RECORDS):
            interval = min(interval, CATCH_UP_SLICE_SECONDS)
        slice = Slice(min(interval, left), continuing, settled, dict(in_flight))
        results = copy_slice(work, slice)
        continuing = True
        last_copied = sum(result.copied for result in results)
        commit(results)
        for result in results:
            tp = (result.topic, result.partition)
            positions[tp] = result.end
            in_flight[tp] = result.in_flight
            _add(totals[tp], result)
        terms.committed(list(totals.values()))
    return list(totals.values())


def _add(total: PartitionResult, part: PartitionResult) -> None:
    total.end = part.end
    total.copied += part.copied
    total.skipped += part.skipped
    total.bytes += part.bytes
    total.expired += part.expired
    total.schema_translated += part.schema_translated
    total.schema_unchanged += part.schema_unchanged
    total.held = part.held  # the latest slice's: a partition that copies again holds no more
    if part.lost_first >= 0:
        if total.lost_first < 0:
            total.lost_first = part.lost_first
        total.lost_last = part.lost_last
    total.latency.add(part.latency)
    total.record_age.add(part.record_age)
