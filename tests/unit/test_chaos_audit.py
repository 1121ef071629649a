"""The chaos audit counts what it claims: lost, duplicated, reordered, changed copies."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.audit import Rewind, audit, rewinds

SOURCE = {0: [(0, 10), (1, 11), (2, 12), (5, 15)], 1: [(0, 20)]}


def test_an_exact_copy_is_exact() -> None:
    result = audit(SOURCE, SOURCE)
    assert result.exact
    assert result.total("copies") == 5


def test_each_fault_is_counted_in_its_own_column() -> None:
    target = {
        0: [(0, 10), (2, 12), (1, 11), (1, 11), (5, 99), (7, 17)],  # 1 reordered, 1 duplicate
        1: [],
    }
    result = audit(SOURCE, target)
    p0, p1 = result.partitions
    assert (p0.lost, p0.duplicated, p0.reordered, p0.mismatched, p0.foreign) == (0, 1, 1, 1, 1)
    assert (p1.lost, p1.first_lost) == (1, 0)
    assert not result.exact


@given(
    st.lists(st.integers(0, 1000), unique=True).map(sorted),
    st.data(),
)
def test_a_replayed_suffix_is_duplicates_only(offsets: list[int], data: st.DataObject) -> None:
    """At-least-once replays re-copy a stretch: duplicates, never reordered or lost."""
    source = {0: [(o, o * 7) for o in offsets]}
    cut = data.draw(st.integers(0, len(offsets)))
    replay_from = data.draw(st.integers(0, cut))
    copies = source[0][:cut] + source[0][replay_from:]
    result = audit(source, {0: copies})
    assert result.total("duplicated") == cut - replay_from
    assert result.total("lost") == result.total("reordered") == 0


def test_rewinds_name_where_copies_start_over_and_how_many_follow() -> None:
    target = {
        0: [(0, 1), (1, 1), (2, 1), (1, 1), (2, 1), (3, 1), (4, 1)],
        1: [(0, 1), (1, 1)],
        2: [(5, 1), (6, 1), (5, 1)],
    }
    assert rewinds(target) == [
        Rewind(partition=0, at=3, highest=2, to=1, records=2),
        Rewind(partition=2, at=2, highest=6, to=5, records=1),
    ]
