"""The stranded tail of a flow A->B after an unplanned failover: which records reached A after
the flow's last replicated position and never reached B. Pure code, no I/O (the reads are
`ferry.ops.reconcile`).

Per source partition, with P the flow's last replicated position on B (the next source offset
B does not hold; None when nothing of the partition was ever copied, which counts as A's log
start), L and E A's log start and last stable offset when A came back:

- the stranded records are the *real* records A holds at offsets P <= o < E: records read
  with read_committed, so aborted records, transaction markers and offsets compaction emptied
  are never among them (they hold nothing to lose), except
- records whose `ferry.origin` names B itself: they came from B (an identity-policy flow B->A
  copied them to A), so B has them already; the copy loop skips them the same way. They are
  counted apart (`from_target`) and break a range.
- a range is a run of stranded records in offset order; it continues across offsets that hold
  no record and breaks only at a record that is not stranded. If a range claimed a record that
  B holds, a replay would copy it twice; if it left one out, the replay would lose it.
- P < L: retention removed offsets P .. L-1 from A too; they are gone from both clusters
  (`expired`, a count of offsets, not records).
- P > E: B holds offsets A no longer has (A lost acknowledged writes, e.g. an unclean
  restart); nothing is stranded there (`ahead`).

The recovery point (`RecoveryPoint`) is read off record timestamps, which grow within a
partition unless producers set them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ferry.kafka.provenance import Origin

__all__ = [
    "LogTail",
    "OriginCount",
    "RecoveryPoint",
    "SeenRecord",
    "StrandedPartition",
    "StrandedRange",
    "recovery_point",
    "stranded_partition",
]


@dataclass(frozen=True)
class SeenRecord:
    """A real record read on A: its offset, timestamp (ms; None when it has none) and its own
    `ferry.origin` header when it carries one (it was itself copied from elsewhere)."""

    offset: int
    timestamp_ms: int | None = None
    origin: Origin | None = None


@dataclass(frozen=True)
class LogTail:
    """What is known of one source partition: the flow's position, A's log bounds and the real
    records A holds from the read's start (at most P, to see the last replicated record) on,
    in offset order."""

    topic: str
    partition: int
    position: int | None
    log_start: int
    log_end: int
    records: Sequence[SeenRecord] = ()


@dataclass(frozen=True)
class StrandedRange:
    first: int
    last: int
    count: int

    def as_json(self) -> dict[str, int]:
        return {"first": self.first, "last": self.last, "count": self.count}


@dataclass(frozen=True)
class OriginCount:
    """Stranded records that carry one origin stream (cluster, topic, partition), with the
    first and last origin offsets among them."""

    cluster_id: str
    alias: str
    topic: str
    partition: int
    count: int
    first: int
    last: int

    def as_json(self) -> dict[str, Any]:
        return {
            "cluster_id": self.cluster_id,
            "cluster": self.alias,
            "topic": self.topic,
            "partition": self.partition,
            "count": self.count,
            "first_origin_offset": self.first,
            "last_origin_offset": self.last,
        }


@dataclass(frozen=True)
class StrandedPartition:
    topic: str
    partition: int
    start: int  # where stranding starts: the position, or A's log start when there is none
    log_end: int
    ranges: tuple[StrandedRange, ...] = ()
    own: int = 0  # stranded records produced on A (no origin header)
    by_origin: tuple[OriginCount, ...] = ()
    from_target: int = 0
    expired: int = 0
    ahead: int = 0
    oldest_ms: int | None = None
    newest_ms: int | None = None
    newest_replicated_ms: int | None = None

    @property
    def count(self) -> int:
        return sum(r.count for r in self.ranges)

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "position": self.start,
            "log_end": self.log_end,
            "stranded": self.count,
            "ranges": [r.as_json() for r in self.ranges],
            "own": self.own,
            "by_origin": [o.as_json() for o in self.by_origin],
            "from_target": self.from_target,
            "expired": self.expired,
            "ahead": self.ahead,
            "oldest_ms": self.oldest_ms,
            "newest_ms": self.newest_ms,
            "newest_replicated_ms": self.newest_replicated_ms,
        }


def stranded_partition(tail: LogTail, target_cluster_id: str) -> StrandedPartition:
    """The stranded records of one partition (see the module doc for the rule)."""
    start = tail.log_start if tail.position is None else tail.position
    expired = max(0, min(tail.log_start, tail.log_end) - start)
    ahead = max(0, start - tail.log_end)
    ranges: list[StrandedRange] = []
    origins: dict[tuple[str, str, str, int], list[int]] = {}
    own = from_target = 0
    oldest = newest = replicated = None
    first = last = -1
    count = 0
    previous = -1
    for record in tail.records:
        if record.offset <= previous:
            raise ValueError(
                f"{tail.topic} partition {tail.partition}: offsets must grow, "
                f"{record.offset} after {previous}"
            )
        previous = record.offset
        ts = _timestamp(record)
        if record.offset < start:
            if ts is not None:
                replicated = ts if replicated is None else max(replicated, ts)
            continue
        if record.offset >= tail.log_end:
            break  # arrived after the end was read: the next reconcile sees it
        origin = record.origin
        if origin is not None and origin.cluster_id == target_cluster_id:
            from_target += 1
            if count:
                ranges.append(StrandedRange(first, last, count))
                count = 0
            continue
        if not count:
            first = record.offset
        last = record.offset
        count += 1
        if origin is None:
            own += 1
        else:
            key = (origin.cluster_id, origin.alias, origin.topic, origin.partition)
            origins.setdefault(key, []).append(origin.offset)
        if ts is not None:
            oldest = ts if oldest is None else min(oldest, ts)
            newest = ts if newest is None else max(newest, ts)
    if count:
        ranges.append(StrandedRange(first, last, count))
    by_origin = tuple(
        OriginCount(cid, alias, topic, partition, len(seen), min(seen), max(seen))
        for (cid, alias, topic, partition), seen in sorted(origins.items())
    )
    return StrandedPartition(
        tail.topic,
        tail.partition,
        start,
        tail.log_end,
        tuple(ranges),
        own,
        by_origin,
        from_target,
        expired,
        ahead,
        oldest,
        newest,
        replicated,
    )


@dataclass(frozen=True)
class RecoveryPoint:
    """The flow's recovery point when A was lost, from record timestamps (ms).

    - `copied_until_ms`: the newest timestamp among the last replicated records of the flow's
      partitions: when B last received a record of A, as far as the records tell.
    - `oldest_ms`, `newest_ms`: the oldest and newest stranded record.
    - `rpo_ms`: the age of the oldest stranded record when A was lost, that moment being the
      newest record A holds (stranded or replicated): the last write A is known to have
      taken. It is `ferry status`'s RPO (now minus the oldest record not on the target) read
      at A's last write. 0 when nothing is stranded; None when no stranded record has a
      timestamp.
    - `behind_ms`: how far behind the copy was when B last received a record: copied_until
      minus the oldest stranded record, at least 0 (0: the copy was caught up then and every
      stranded record was written after B stopped receiving).
    """

    copied_until_ms: int | None
    oldest_ms: int | None
    newest_ms: int | None
    rpo_ms: int | None
    behind_ms: int | None

    def as_json(self) -> dict[str, int | None]:
        return {
            "copied_until_ms": self.copied_until_ms,
            "oldest_stranded_ms": self.oldest_ms,
            "newest_stranded_ms": self.newest_ms,
            "rpo_ms": self.rpo_ms,
            "behind_ms": self.behind_ms,
        }


def recovery_point(partitions: Iterable[StrandedPartition]) -> RecoveryPoint:
    parts = list(partitions)
    stranded = sum(p.count for p in parts)
    copied = _extreme(max, (p.newest_replicated_ms for p in parts))
    oldest = _extreme(min, (p.oldest_ms for p in parts))
    newest = _extreme(max, (p.newest_ms for p in parts))
    if not stranded:
        return RecoveryPoint(copied, None, None, 0, 0)
    if oldest is None or newest is None:
        return RecoveryPoint(copied, None, None, None, None)
    lost_at = newest if copied is None else max(newest, copied)
    behind = None if copied is None else max(0, copied - oldest)
    return RecoveryPoint(copied, oldest, newest, lost_at - oldest, behind)


def _timestamp(record: SeenRecord) -> int | None:
    """A record without a timestamp (-1 on the wire) tells nothing about time."""
    ts = record.timestamp_ms
    return ts if ts is not None and ts >= 0 else None


def _extreme(pick: Any, values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return pick(present) if present else None
