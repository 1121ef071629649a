"""The fault suite's checker counts what it claims: each violation with its exact count and the
records that show it, under both modes (`tests.faults.invariants`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.provenance import Origin
from tests.faults.invariants import (
    Copy,
    Example,
    check,
    group_offsets_after_failover,
    unseen_series,
)


def _acked(*sizes: int) -> dict[int, list[tuple[int, str]]]:
    """Acknowledged records of a run: source partition p holds ids r<p>-<offset>."""
    return {p: [(o, f"r{p}-{o}") for o in range(n)] for p, n in enumerate(sizes)}


def _copy(p: int, o: int, at: int | None = None) -> Copy:
    return Copy(f"r{p}-{o}", p, o, at)


def _exact(acked: dict[int, list[tuple[int, str]]]) -> dict[int, list[Copy]]:
    return {p: [Copy(rid, p, o, o) for o, rid in records] for p, records in acked.items()}


def _source(p: int, o: int) -> Example:
    return Example("source", p, o, f"r{p}-{o}")


def _target(p: int, at: int, record_id: str) -> Example:
    return Example("target", p, at, record_id)


def test_an_exact_copy_passes_both_modes() -> None:
    acked = _acked(5, 3)
    verdict = check(acked, [], _exact(acked), "exactly-once")
    assert verdict.to_row() == {
        "acknowledged": 8,
        "indefinite": 0,
        "copies": 8,
        "copied": 8,
        "indefinite_copied": 0,
        "lost": 0,
        "duplicated": 0,
        "out_of_order": 0,
        "aborted_read": 0,
        "foreign": 0,
        "misattributed": 0,
    }
    assert verdict.ok() and verdict.ok("at-least-once")
    assert verdict.examples == {}
    assert "every acknowledged record copied once, in order" in verdict.describe()


def test_each_violation_is_counted_in_its_own_column_with_its_records() -> None:
    acked = _acked(6, 2)
    target = {
        0: [
            _copy(0, 0, 10),
            _copy(0, 2, 11),
            _copy(0, 1, 12),  # out of order: after 2
            _copy(0, 2, 13),  # duplicate
            Copy("x-1", 0, 99, 14),  # aborted
            Copy("stray", 0, 98, 15),  # foreign
            Copy("r0-4", 0, 5, 16),  # its header names offset 5, the ack said 4
            _copy(0, 5, 18),
        ],
        1: [_copy(1, 0, 3)],  # r1-1 lost, as are r0-3
    }
    verdict = check(acked, ["x-1", "x-2"], target, "exactly-once")
    row = verdict.to_row()
    assert (row["lost"], row["duplicated"], row["out_of_order"]) == (2, 1, 1)
    assert (row["aborted_read"], row["foreign"], row["misattributed"]) == (1, 1, 1)
    assert (row["copies"], row["copied"], row["acknowledged"]) == (9, 6, 8)
    assert verdict.examples == {
        "lost": (_source(0, 3), _source(1, 1)),
        "duplicated": (_target(0, 13, "r0-2"),),
        "out_of_order": (_target(0, 12, "r0-1"),),
        "aborted_read": (_target(0, 14, "x-1"),),
        "foreign": (_target(0, 15, "stray"),),
        "misattributed": (_target(0, 16, "r0-4"),),
    }
    assert verdict.violations() == (
        "lost",
        "duplicated",
        "out_of_order",
        "aborted_read",
        "foreign",
        "misattributed",
    )
    assert not verdict.ok() and not verdict.ok("at-least-once")
    message = verdict.describe()
    assert message.startswith("FAILED exactly-once: 8 acknowledged records, 6 copied")
    for phrase in (
        "lost 2, e.g. source 0@3 (r0-3), source 1@1 (r1-1)",
        "duplicated 1, e.g. target 0@13 (r0-2)",
        "out of order 1, e.g. target 0@12 (r0-1)",
        "aborted read 1, e.g. target 0@14 (x-1)",
        "foreign 1, e.g. target 0@15 (stray)",
        "misattributed 1, e.g. target 0@16 (r0-4)",
    ):
        assert phrase in message, message


def test_at_least_once_allows_duplicates_and_nothing_else() -> None:
    acked = _acked(4)
    replayed = {0: [_copy(0, o) for o in (0, 1, 2, 1, 2, 3)]}
    verdict = check(acked, [], replayed, "at-least-once")
    assert (verdict.duplicated, verdict.out_of_order, verdict.lost) == (2, 0, 0)
    assert verdict.ok() and not verdict.ok("exactly-once")
    assert verdict.violations("exactly-once") == ("duplicated",)
    assert verdict.describe().startswith("OK at-least-once")
    assert "duplicated 2 (allowed), e.g. target 0@3 (r0-1), target 0@4 (r0-2)" in (
        verdict.describe()
    )
    # A copy that came before its predecessor is still out of order at-least-once.
    swapped = {0: [_copy(0, o) for o in (0, 2, 1, 3)]}
    assert not check(acked, [], swapped, "at-least-once").ok()


def test_unconfirmed_records_are_neither_lost_nor_foreign_but_still_judged() -> None:
    acked = {0: [(0, "r0-0"), (2, "r0-2"), (3, "r0-3")]}  # offset 1: a produce that timed out
    unconfirmed = ["t-1", "t-2", "r0-3"]  # t-2 never written; r0-3 acknowledged after all
    target = {0: [_copy(0, 0), Copy("t-1", 0, 1), _copy(0, 2), Copy("t-1", 0, 1)]}
    verdict = check(acked, [], target, "exactly-once", indefinite=unconfirmed)
    assert (verdict.indefinite, verdict.indefinite_copied) == (2, 1)
    assert (verdict.lost, verdict.foreign, verdict.duplicated) == (1, 0, 1)
    assert verdict.examples["lost"] == (_source(0, 3),)
    assert verdict.examples["duplicated"] == (_target(0, 3, "t-1"),)
    # Its place comes from its header: after a copy of offset 2 it is out of order.
    late = [_copy(0, 0), _copy(0, 2), Copy("t-1", 0, 1), _copy(0, 3)]
    verdict = check(acked, [], {0: late}, "at-least-once", indefinite=unconfirmed)
    assert (verdict.out_of_order, verdict.foreign, verdict.lost) == (1, 0, 0)
    assert verdict.examples["out_of_order"] == (_target(0, 2, "t-1"),)
    # Without the producer's word it would be foreign.
    assert check(acked, [], {0: late}, "at-least-once").foreign == 1


def test_without_target_offsets_examples_give_the_position() -> None:
    verdict = check(_acked(2), [], {0: [("r0-1", 0, 1), ("r0-0", 0, 0)]}, "exactly-once")
    assert verdict.examples["out_of_order"] == (_target(0, 1, "r0-0"),)


def test_copy_reads_the_origin_header() -> None:
    header = Origin("cid", "A", "orders", 2, 41).to_bytes()
    assert Copy.from_origin("r-7", header, at=9) == Copy("r-7", 2, 41, 9)


@pytest.mark.parametrize(
    ("acknowledged", "aborted", "mode", "message"),
    [
        ({0: [(0, "a")]}, [], "exactly-twice", "mode must be one of"),
        ({0: [(0, "a")], 1: [(0, "a")]}, [], "exactly-once", "'a' acknowledged twice"),
        ({0: [(0, "a")]}, ["a"], "exactly-once", "both acknowledged and aborted: ['a']"),
    ],
)
def test_harness_mistakes_are_refused(
    acknowledged: dict[int, list[tuple[int, str]]], aborted: list[str], mode: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        check(acknowledged, aborted, {}, mode)  # type: ignore[arg-type]


_OFFSETS = st.lists(st.integers(0, 500), min_size=1, max_size=60, unique=True).map(sorted)


@given(_OFFSETS, st.data())
def test_dropped_and_duplicated_copies_are_counted_exactly(
    offsets: list[int], data: st.DataObject
) -> None:
    acked = {0: [(o, f"r0-{o}") for o in offsets]}
    dropped = data.draw(st.sets(st.sampled_from(offsets)))
    kept = [o for o in offsets if o not in dropped]
    copies = [_copy(0, o) for o in kept]
    doubled = data.draw(st.lists(st.sampled_from(kept), max_size=20)) if kept else []
    for o in doubled:  # anywhere after its first copy
        first = next(i for i, c in enumerate(copies) if c.offset == o)
        copies.insert(data.draw(st.integers(first + 1, len(copies))), _copy(0, o))
    verdict = check(acked, [], {0: copies}, "at-least-once")
    assert (verdict.lost, verdict.duplicated) == (len(dropped), len(doubled))
    assert verdict.out_of_order == verdict.foreign == verdict.misattributed == 0
    assert verdict.copied == len(kept) and verdict.copies == len(kept) + len(doubled)
    assert verdict.examples.get("lost", ()) == tuple(_source(0, o) for o in sorted(dropped)[:5])
    assert verdict.ok() == (not dropped)
    assert verdict.ok("exactly-once") == (not dropped and not doubled)


@given(st.permutations(range(30)))
def test_shuffled_copies_count_each_first_copy_behind_a_later_one(order: list[int]) -> None:
    acked = _acked(30)
    verdict = check(acked, [], {0: [_copy(0, o) for o in order]}, "exactly-once")
    behind = sum(1 for i, o in enumerate(order) if any(p > o for p in order[:i]))
    assert verdict.out_of_order == behind
    assert verdict.lost == verdict.duplicated == 0
    assert verdict.ok() == (order == sorted(order))


@given(_OFFSETS, st.data())
def test_aborted_and_foreign_copies_are_counted_and_change_nothing_else(
    offsets: list[int], data: st.DataObject
) -> None:
    acked = {0: [(o, f"r0-{o}") for o in offsets]}
    clean = [_copy(0, o) for o in offsets]
    strays = data.draw(st.lists(st.sampled_from(["x-1", "x-2", "f-1", "f-2"]), max_size=10))
    copies = list(clean)
    for record_id in strays:
        copies.insert(data.draw(st.integers(0, len(copies))), Copy(record_id, 0, 0))
    verdict = check(acked, ["x-1", "x-2", "x-3"], {0: copies}, "exactly-once")
    aborted = sum(1 for s in strays if s.startswith("x"))
    assert (verdict.aborted_read, verdict.foreign) == (aborted, len(strays) - aborted)
    base = check(acked, [], {0: clean}, "exactly-once")
    for kind in ("lost", "duplicated", "out_of_order", "copied", "misattributed"):
        assert (
            getattr(verdict, kind)
            == getattr(base, kind)
            == (len(offsets) if kind == "copied" else 0)
        )
    assert verdict.ok() == (not strays)


# Group offsets after a failover. Copies of source offset o sit at target offset 2*o (commit
# markers take the odd offsets).
_GAPPED = {0: [_copy(0, o, 2 * o) for o in range(6)]}


@pytest.mark.parametrize(
    ("translated", "skipped", "re_read"),
    [(6, 0, 0), (5, 0, 0), (4, 0, 1), (0, 0, 3), (7, 1, 0), (12, 3, 0)],
)
def test_group_offsets_skip_nothing_up_to_the_first_unread_copy(
    translated: int, skipped: int, re_read: int
) -> None:
    verdict = group_offsets_after_failover({0: 3}, {0: translated}, _GAPPED)
    assert (verdict.skipped, verdict.re_read, verdict.partitions) == (skipped, re_read, 1)
    assert verdict.ok == (skipped == 0)
    assert verdict.examples == tuple(_target(0, 2 * o, f"r0-{o}") for o in range(3, 3 + skipped))


def test_group_offsets_may_start_at_a_replayed_copy() -> None:
    replay = {0: [_copy(0, o, at) for at, o in enumerate([0, 1, 2, 3, 2, 3, 4])]}
    on_second_copy = group_offsets_after_failover({0: 3}, {0: 5}, replay)
    assert (on_second_copy.skipped, on_second_copy.re_read) == (0, 0)
    assert group_offsets_after_failover({0: 3}, {0: 4}, replay).re_read == 1
    past = group_offsets_after_failover({0: 3}, {0: 6}, replay)
    assert (past.skipped, past.examples) == (1, (_target(0, 3, "r0-3"),))
    assert "FAILED group offsets on 1 target partitions: 1 records skipped" in past.describe()
    assert "target 0@3 (r0-3)" in past.describe()


def test_group_offsets_name_partitions_left_untranslated() -> None:
    target = {0: [_copy(0, 0, 0)], 1: [_copy(1, 0, 0)], 2: [_copy(2, 0, 0)]}
    verdict = group_offsets_after_failover({0: 1, 1: 0}, {0: 1}, target)
    assert (verdict.partitions, verdict.untranslated, verdict.ok) == (2, (1,), False)
    assert verdict.to_row() == {"partitions": 2, "skipped": 0, "re_read": 0, "untranslated": 1}
    assert "no translated offset for target partitions [1]" in verdict.describe()
    with pytest.raises(ValueError, match="target partition 0 need their target offset"):
        group_offsets_after_failover({0: 0}, {0: 0}, {0: [_copy(0, 0)]})


@given(st.integers(0, 20), st.integers(0, 45))
def test_group_offsets_count_what_a_gapped_log_skips_and_repeats(
    committed: int, translated: int
) -> None:
    target = {0: [_copy(0, o, 2 * o) for o in range(20)]}
    verdict = group_offsets_after_failover({0: committed}, {0: translated}, target)
    first_unread_at = 2 * committed if committed < 20 else None
    assert verdict.ok == (first_unread_at is None or translated <= first_unread_at)
    assert verdict.skipped == sum(1 for o in range(committed, 20) if 2 * o < translated)
    assert verdict.re_read == sum(1 for o in range(committed) if 2 * o >= translated)


def test_unseen_series_gives_the_first_time_it_reached_zero() -> None:
    samples = [(3.0, 0), (0.0, 9), (1.0, 0), (2.0, 4), (4.0, 0)]
    assert unseen_series(samples) == 1.0
    assert unseen_series(samples, since=1.5) == 3.0
    assert unseen_series([(0.0, 5), (1.0, 2)]) is None
    assert unseen_series([]) is None
    with pytest.raises(ValueError, match="cannot be negative"):
        unseen_series([(0.0, -1)])
