"""The stranded tail's rule (ferry.offsets.stranded): exactly the real records at or after the
flow's position and before A's end, ranges across gaps, B's own records apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.provenance import Origin
from ferry.offsets.stranded import (
    LogTail,
    SeenRecord,
    StrandedRange,
    recovery_point,
    stranded_partition,
)

B_ID = "cluster-b"


def _tail(position: int | None, end: int, offsets: list[int], start: int = 0) -> LogTail:
    return LogTail("orders", 0, position, start, end, [SeenRecord(o, 1000 + o) for o in offsets])


def test_records_from_the_position_to_the_end_across_gaps() -> None:
    # 12 and 13: a transaction marker and a compacted offset, not records.
    found = stranded_partition(_tail(10, 20, [8, 9, 10, 11, 14, 15, 16, 17, 18, 19]), B_ID)
    assert found.ranges == (StrandedRange(10, 19, 8),)
    assert found.count == 8 and found.own == 8
    assert (found.oldest_ms, found.newest_ms, found.newest_replicated_ms) == (1010, 1019, 1009)


def test_caught_up_and_records_after_the_end_are_not_stranded() -> None:
    assert stranded_partition(_tail(20, 20, [18, 19]), B_ID).count == 0
    later = stranded_partition(_tail(20, 20, [19, 20, 21]), B_ID)
    assert later.count == 0 and later.newest_replicated_ms == 1019


def test_no_position_means_everything_a_holds() -> None:
    found = stranded_partition(_tail(None, 10, [5, 6, 9], start=5), B_ID)
    assert found.start == 5 and found.ranges == (StrandedRange(5, 9, 3),)


def test_records_that_came_from_b_break_ranges_and_are_counted_apart() -> None:
    from_b = Origin(B_ID, "B", "orders", 0, 77)
    from_c = Origin("cluster-c", "C", "payments", 2, 40)
    records = [
        SeenRecord(10, 1),
        SeenRecord(11, 2, from_c),
        SeenRecord(12, 3, from_b),
        SeenRecord(13, 4),
        SeenRecord(14, 5, Origin("cluster-c", "C", "payments", 2, 41)),
    ]
    found = stranded_partition(LogTail("orders", 0, 10, 0, 15, records), B_ID)
    assert found.ranges == (StrandedRange(10, 11, 2), StrandedRange(13, 14, 2))
    assert found.from_target == 1 and found.own == 2
    (origin,) = found.by_origin
    assert (origin.alias, origin.topic, origin.partition, origin.count) == ("C", "payments", 2, 2)
    assert (origin.first, origin.last) == (40, 41)


def test_expired_and_ahead() -> None:
    assert stranded_partition(_tail(3, 10, [7, 8, 9], start=7), B_ID).expired == 4
    ahead = stranded_partition(_tail(12, 10, [8, 9]), B_ID)
    assert ahead.ahead == 2 and ahead.count == 0


def test_offsets_must_grow() -> None:
    with pytest.raises(ValueError, match="offsets must grow"):
        stranded_partition(_tail(0, 10, [3, 3]), B_ID)


def test_recovery_point() -> None:
    # B last received the record stamped 1009; stranded records are stamped 1005..1012.
    lagging = stranded_partition(_tail(5, 13, list(range(13))), B_ID)
    other = stranded_partition(LogTail("t", 1, 4, 0, 5, [SeenRecord(3, 1009)]), B_ID)
    point = recovery_point([lagging, other])
    assert point.copied_until_ms == 1009
    assert (point.oldest_ms, point.newest_ms) == (1005, 1012)
    assert point.rpo_ms == 1012 - 1005
    assert point.behind_ms == 1009 - 1005


def test_recovery_point_when_nothing_is_stranded_or_nothing_has_a_time() -> None:
    assert recovery_point([stranded_partition(_tail(3, 3, [2]), B_ID)]).rpo_ms == 0
    untimed = LogTail("t", 0, 0, 0, 2, [SeenRecord(0, None), SeenRecord(1, -1)])
    point = recovery_point([stranded_partition(untimed, B_ID)])
    assert point.rpo_ms is None and point.behind_ms is None


@given(
    held=st.lists(st.integers(0, 60), unique=True).map(sorted),
    from_b=st.sets(st.integers(0, 60)),
    position=st.none() | st.integers(0, 70),
    end=st.integers(0, 70),
)
def test_ranges_hold_exactly_the_stranded_records(
    held: list[int], from_b: set[int], position: int | None, end: int
) -> None:
    """Every real record in [start, end) not from B lies in exactly one range; nothing else
    does, and no range spans a record from B."""
    records = [
        SeenRecord(o, o, Origin(B_ID, "B", "t", 0, o) if o in from_b else None) for o in held
    ]
    found = stranded_partition(LogTail("t", 0, position, 0, end, records), B_ID)
    start = 0 if position is None else position
    expected = [o for o in held if start <= o < end and o not in from_b]
    covered = [o for r in found.ranges for o in held if r.first <= o <= r.last]
    assert covered == expected
    assert found.count == len(expected) == sum(r.count for r in found.ranges)
    assert all(r.first <= r.last for r in found.ranges)
