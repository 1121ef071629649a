"""The recovery point objective rule (`ferry.flows.rpo`): caught up is 0, lagging is the age of
the first real record not copied, and what was not read in time is unknown, never 0."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.flows.rpo import (
    FirstRecord,
    NoRecordBefore,
    flow_rpo,
    lagging,
    partition_rpo,
    partition_rpos,
)

NOW = 1_700_000_100_000  # ms


def test_caught_up_is_zero_whatever_was_read() -> None:
    assert partition_rpo(100, 100, None, NOW) == 0.0
    assert partition_rpo(120, 100, None, NOW) == 0.0  # the target ahead (source truncated)
    assert partition_rpo(100, 100, FirstRecord(100, NOW - 5_000), NOW) == 0.0


def test_lagging_is_the_age_of_the_first_record_not_copied() -> None:
    assert partition_rpo(40, 100, FirstRecord(40, NOW - 12_500), NOW) == 12.5


def test_a_gap_at_the_position_counts_the_next_real_record() -> None:
    # Offsets 40..44 aborted or compacted away: the first real record is at 45.
    assert partition_rpo(40, 100, FirstRecord(45, NOW - 3_000), NOW) == 3.0


def test_only_markers_or_aborted_records_left_is_caught_up() -> None:
    assert partition_rpo(98, 100, NoRecordBefore(100), NOW) == 0.0
    assert partition_rpo(98, 100, NoRecordBefore(103), NOW) == 0.0


def test_an_end_reached_below_the_end_read_is_unknown() -> None:
    assert partition_rpo(90, 100, NoRecordBefore(95), NOW) is None


def test_a_record_past_the_end_arrived_after_it_was_read() -> None:
    assert partition_rpo(98, 100, FirstRecord(100, NOW - 1_000), NOW) == 0.0


def test_not_read_in_time_is_unknown_never_zero() -> None:
    assert partition_rpo(40, 100, None, NOW) is None


def test_a_record_without_timestamp_is_unknown() -> None:
    assert partition_rpo(40, 100, FirstRecord(40, None), NOW) is None
    assert partition_rpo(40, 100, FirstRecord(40, -1), NOW) is None


def test_a_timestamp_in_the_future_is_zero_not_negative() -> None:
    assert partition_rpo(40, 100, FirstRecord(40, NOW + 60_000), NOW) == 0.0


def test_lagging_partitions_and_where_to_read() -> None:
    ends = {("a", 0): 10, ("a", 1): 5, ("b", 0): 7}
    positions = {("a", 0): 10, ("a", 1): 2}
    assert lagging(positions, ends) == {("a", 1): 2, ("b", 0): 0}


def test_partition_rpos_and_the_flows_worst() -> None:
    ends = {("a", 0): 10, ("a", 1): 5, ("b", 0): 7}
    positions = {("a", 0): 10, ("a", 1): 2}
    probes = {("a", 1): FirstRecord(2, NOW - 4_000), ("b", 0): FirstRecord(0, NOW - 9_000)}
    rpos = partition_rpos(positions, ends, probes, NOW)
    assert rpos == {("a", 0): 0.0, ("a", 1): 4.0, ("b", 0): 9.0}
    assert flow_rpo(rpos.values()) == 9.0
    del probes[("b", 0)]
    rpos = partition_rpos(positions, ends, probes, NOW)
    assert rpos[("b", 0)] is None
    assert flow_rpo(rpos.values()) is None


def test_a_flow_with_no_partition_is_caught_up() -> None:
    assert flow_rpo([]) == 0.0


@given(
    position=st.integers(0, 1_000),
    end=st.integers(0, 1_000),
    offset=st.integers(0, 2_000),
    age_ms=st.integers(-10_000, 10**9),
)
def test_never_negative_and_zero_only_when_nothing_is_at_risk(
    position: int, end: int, offset: int, age_ms: int
) -> None:
    rpo = partition_rpo(position, end, FirstRecord(offset, NOW - age_ms), NOW)
    assert rpo is not None and rpo >= 0
    if position < end and offset < end and age_ms > 0:
        assert rpo == age_ms / 1000.0
    assert partition_rpo(position, end, None, NOW) == (0.0 if position >= end else None)
