"""The audit's rules on lists (ferry.audit.diff): classification, ranges, buckets, times."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.audit.diff import (
    KeyedRecord,
    audit_partition,
    bucket_start,
    cap_ranges,
    merge_ranges,
    parse_bucket,
    parse_time,
    split_key,
    to_ranges,
)
from ferry.kafka.provenance import Origin


def _key(offset: int, cluster: str = "cid", alias: str = "A", partition: int = 0) -> str:
    return Origin(cluster, alias, "orders", partition, offset).to_bytes().decode()


def _source(offsets: range | list[int]) -> list[KeyedRecord]:
    return [KeyedRecord(o, _key(o)) for o in offsets]


def _copies(offsets: list[int]) -> list[KeyedRecord]:
    return [KeyedRecord(i, _key(o)) for i, o in enumerate(offsets)]


STREAM = "cid|A|0|orders"


def test_a_complete_copy_has_nothing_to_report() -> None:
    d = audit_partition(_source(range(10)), _copies(list(range(10))), 10, {STREAM: 0})
    assert (d.source, d.copied, d.copies) == (10, 10, 10)
    assert (d.missing, d.duplicated, d.foreign, d.in_flight, d.expired) == ([], {}, [], 0, 0)


def test_missing_duplicated_foreign_expired_and_in_flight_are_told_apart() -> None:
    source = _source(range(5, 20))  # retention removed 0-4
    target = [
        *_copies([2, 3, 5, 6, 6, 6, 9, 10]),
        KeyedRecord(8, None),  # no header
        KeyedRecord(9, "not an origin"),
        KeyedRecord(10, _key(7, cluster="other")),  # an origin this source never had
    ]
    d = audit_partition(source, target, 15, {STREAM: 5})
    assert d.expired == 2  # copies of 2 and 3, which the source no longer holds
    assert d.duplicated == {6: 2}
    assert d.missing == [7, 8, 11, 12, 13, 14]
    assert d.in_flight == 5  # 15-19: at or past the replicated position
    assert d.foreign == [8, 9, 10]
    assert (d.copied, d.copies) == (4, 6)


def test_a_record_past_the_position_that_arrived_anyway_is_copied() -> None:
    d = audit_partition(_source(range(4)), _copies([0, 3]), 2, {STREAM: 0})
    assert (d.copied, d.missing, d.in_flight) == (2, [1], 1)


def test_without_a_position_nothing_is_missing_yet() -> None:
    d = audit_partition(_source(range(4)), [], None, {STREAM: 0})
    assert (d.missing, d.in_flight) == ([], 4)


def test_a_later_hop_matches_by_the_unchanged_origin() -> None:
    # B holds copies of A's records (their keys are A's origins) at its own offsets 100-104;
    # C's copies carry the same origins, so they match whatever B's offsets are.
    on_b = [KeyedRecord(100 + i, _key(40 + i)) for i in range(5)]
    on_c = [KeyedRecord(i, _key(40 + i)) for i in (0, 1, 3, 4)] + [KeyedRecord(9, _key(39))]
    d = audit_partition(on_b, on_c, 105, {STREAM: 40})
    assert d.missing == [102]  # reported in B's offsets
    assert (d.expired, d.foreign) == (1, [])  # A's 39 is older than anything B still holds


def test_split_key_reads_the_origin_format() -> None:
    assert split_key(_key(42)) == (STREAM, 42)
    assert split_key("a|b|0|x|orders") is None
    assert split_key("a|b|c") is None
    # The topic is free-form and goes last: a '|' in it stays in the stream.
    assert split_key("cid|A|3|7|odd|name") == ("cid|A|3|odd|name", 7)


def test_ranges_break_at_held_records_only() -> None:
    assert to_ranges([5, 6, 7, 9, 10, 20]) == [(5, 7, 3), (9, 10, 2), (20, 20, 1)]
    # 8 is not held (a transaction marker): 7 and 9 are neighbours.
    held = [5, 6, 7, 9, 10, 11, 20]
    assert to_ranges([5, 6, 7, 9, 10, 20], held) == [(5, 10, 5), (20, 20, 1)]
    assert to_ranges([]) == []


@given(st.sets(st.integers(0, 300)))
def test_ranges_cover_exactly_the_offsets(offsets: set[int]) -> None:
    ranges = to_ranges(offsets)
    covered = {o for first, last, _ in ranges for o in range(first, last + 1)}
    assert covered == offsets
    assert sum(count for *_, count in ranges) == len(offsets)
    # Maximal: no two ranges touch.
    assert all(b[0] > a[1] + 1 for a, b in itertools.pairwise(ranges))


@given(st.sets(st.integers(0, 300)), st.integers(1, 5))
def test_merging_split_ranges_gives_the_whole_ones(offsets: set[int], pieces: int) -> None:
    ordered = sorted(offsets)
    parts = [ordered[i::pieces] for i in range(pieces)]  # interleaved: pieces overlap
    split = [r for part in parts for r in to_ranges(part)]
    merged = merge_ranges(split)
    assert [(f, la) for f, la, _ in merged] == [(f, la) for f, la, _ in to_ranges(offsets)]
    assert sum(c for *_, c in merged) == len(offsets)


def test_cap_ranges_says_when_some_were_left_off() -> None:
    ranges = [(i, i, 1) for i in range(0, 10, 2)]
    assert cap_ranges(ranges, 5) == (ranges, False)
    assert cap_ranges(ranges, 2) == (ranges[:2], True)


@given(st.integers(0, 2**45), st.integers(1, 10**8))
def test_a_bucket_holds_its_timestamp(timestamp: int, width: int) -> None:
    start = bucket_start(timestamp, width)
    assert start <= timestamp < start + width
    assert start % width == 0


def test_bucket_widths() -> None:
    assert parse_bucket("1m") == 60_000
    assert parse_bucket("30s") == 30_000
    assert parse_bucket(" 2h ") == 7_200_000
    for bad in ("0s", "1 minute", "m", "-1m"):
        with pytest.raises(ValueError, match=f"bucket '{bad}'"):
            parse_bucket(bad)


def test_times_are_iso_or_a_duration_ago() -> None:
    now = 1_800_000_000_000
    assert parse_time("15m", now) == now - 900_000
    assert parse_time("2026-01-31T12:00:00Z", now) == 1_769_860_800_000
    assert parse_time("2026-01-31T12:00:00", now) == 1_769_860_800_000
    with pytest.raises(ValueError, match="time 'yesterday'"):
        parse_time("yesterday", now)
