"""The audit's rules, with no I/O: how a source record is classified and ranges are formed.

A source record is identified by its *key*: its own `ferry.origin` header if it has one (it is
itself a copy, on a later hop), else the header a copy of it would carry. A copy on the target
names its source record by the same key, so one rule serves every hop and end to end.

For each source record, with `copies` the target records naming its key:
  copies >= 1                  -> copied (copies - 1 of them are *duplicated*)
  copies == 0, offset >= pos   -> *in flight*: newer than the flow's replicated position at the
                                  audit's start (`pos`, or no position at all), not lost yet
  copies == 0, otherwise       -> *missing*
A target record whose key names no source record is *expired* when the key's offset is below the
oldest offset the source still holds for that origin (retention removed the original; never
counted as loss), else *foreign* (no header, or a header no source record explains).

The Spark job (spark_job.py) applies exactly these rules to DataFrames; `audit_partition` is the
same thing on lists, the reference the unit tests hold the rules to.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "KeyedRecord",
    "PartitionDiff",
    "audit_partition",
    "bucket_start",
    "cap_ranges",
    "merge_ranges",
    "parse_bucket",
    "parse_time",
    "split_key",
    "to_ranges",
]

# (first offset, last offset, records in it): inclusive, first <= last.
Range = tuple[int, int, int]


@dataclass(frozen=True)
class KeyedRecord:
    offset: int
    key: str | None  # a source record always has one; a target record without header: None


@dataclass
class PartitionDiff:
    source: int = 0
    copied: int = 0  # distinct source records with at least one copy
    copies: int = 0  # target records naming a source record
    missing: list[int] = field(default_factory=list)  # source offsets
    duplicated: Counter[int] = field(default_factory=Counter)  # source offset -> extra copies
    in_flight: int = 0
    expired: int = 0
    foreign: list[int] = field(default_factory=list)  # target offsets


def split_key(key: str) -> tuple[str, int] | None:
    """(origin stream, offset) of a `ferry.origin` value: the stream is everything but the
    offset. None for a value that is not one (its record is foreign)."""
    parts = key.split("|", 4)
    if len(parts) != 5 or not parts[3].isdigit():
        return None
    cluster_id, alias, partition, offset, topic = parts
    return f"{cluster_id}|{alias}|{partition}|{topic}", int(offset)


def audit_partition(
    source: Sequence[KeyedRecord],
    target: Sequence[KeyedRecord],
    position: int | None,
    held_from: Mapping[str, int],
) -> PartitionDiff:
    """Classify one source partition's records against the copies on the target.

    `position` is the flow's replicated position (next source offset) at the audit's start;
    `held_from` maps an origin stream to the oldest offset the source still holds of it.
    """
    result = PartitionDiff(source=len(source))
    copies = Counter(r.key for r in target if r.key is not None)
    keys = {r.key for r in source}
    for record in source:
        n = copies.get(record.key, 0) if record.key is not None else 0
        if n:
            result.copied += 1
            result.copies += n
            if n > 1:
                result.duplicated[record.offset] = n - 1
        elif position is None or record.offset >= position:
            result.in_flight += 1
        else:
            result.missing.append(record.offset)
    for record in target:
        if record.key is not None and record.key in keys:
            continue
        parsed = split_key(record.key) if record.key is not None else None
        if parsed is not None and parsed[0] in held_from and parsed[1] < held_from[parsed[0]]:
            result.expired += 1
        else:
            result.foreign.append(record.offset)
    return result


def to_ranges(offsets: Iterable[int], held: Sequence[int] | None = None) -> list[Range]:
    """Runs of offsets as (first, last, count). With `held` (every offset the partition holds,
    sorted), a run continues across offsets the partition does not hold (transaction markers,
    compacted records): it breaks only at a held record that is not in `offsets`."""
    chosen = sorted(set(offsets))
    if not chosen:
        return []
    rank = {o: i for i, o in enumerate(held)} if held is not None else None
    ranges: list[Range] = []
    first = last = chosen[0]
    count = 1
    for offset in chosen[1:]:
        adjacent = rank[offset] == rank[last] + 1 if rank is not None else offset == last + 1
        if adjacent:
            last = offset
            count += 1
        else:
            ranges.append((first, last, count))
            first = last = offset
            count = 1
    ranges.append((first, last, count))
    return ranges


def merge_ranges(ranges: Iterable[Range]) -> list[Range]:
    """Sorted, with overlapping or touching ranges joined (their counts added, as the ranges
    come from disjoint record sets)."""
    merged: list[Range] = []
    for first, last, count in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            prev_first, prev_last, prev_count = merged[-1]
            merged[-1] = (prev_first, max(prev_last, last), prev_count + count)
        else:
            merged.append((first, last, count))
    return merged


def cap_ranges(ranges: Sequence[Range], limit: int) -> tuple[list[Range], bool]:
    """The first `limit` ranges, and whether any were left off."""
    return list(ranges[:limit]), len(ranges) > limit


_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_bucket(text: str) -> int:
    """A bucket width such as `30s`, `1m`, `1h` in milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)\s*", text)
    if match is None or int(match[1]) <= 0:
        raise ValueError(f"bucket '{text}' is not a positive duration such as 30s, 1m or 1h")
    return int(match[1]) * _UNITS[match[2]]


def bucket_start(timestamp_ms: int, width_ms: int) -> int:
    """The start of the bucket holding `timestamp_ms` (buckets are aligned to the epoch)."""
    return timestamp_ms - timestamp_ms % width_ms


def parse_time(text: str, now_ms: int) -> int:
    """--since/--until: an ISO 8601 time (UTC unless it names a zone) or a duration before
    `now_ms` (`15m` = fifteen minutes ago), in epoch milliseconds."""
    import datetime as dt

    try:
        return now_ms - parse_bucket(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"time '{text}' is neither an ISO 8601 time (2026-01-31T12:00:00Z) nor a duration "
            "before now (15m, 2h)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)
