"""Checkpoints never move back unless the group does; group sync never rewinds or intrudes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.mm2_records import Checkpoint
from ferry.offsets.rules import offsets_to_sync, should_emit


def _cp(upstream: int, downstream: int) -> Checkpoint:
    return Checkpoint("g", "A.t", 0, upstream, downstream)


def test_first_checkpoint_is_emitted() -> None:
    assert should_emit(None, 5, 3)


def test_unchanged_checkpoint_is_not_emitted_again() -> None:
    assert not should_emit(_cp(5, 3), 5, 3)


def test_progress_is_emitted() -> None:
    assert should_emit(_cp(5, 3), 9, 7)


def test_a_lower_downstream_for_the_same_or_later_upstream_is_refused() -> None:
    assert not should_emit(_cp(5, 3), 5, 2)
    assert not should_emit(_cp(5, 3), 6, 2)


def test_a_rewound_source_group_is_followed() -> None:
    assert should_emit(_cp(50, 40), 10, 8)


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), max_size=30))
def test_published_checkpoints_are_monotonic_while_the_group_moves_forward(steps) -> None:
    previous = None
    upstream = 0
    for advance, downstream in steps:
        upstream += advance  # the source group only moves forward here
        if should_emit(previous, upstream, downstream):
            assert previous is None or downstream >= previous.offset
            previous = _cp(upstream, downstream)


def test_group_sync_skips_an_active_group() -> None:
    assert offsets_to_sync(True, {}, {("A.t", 0): 10}) == {}


def test_group_sync_never_rewinds_and_fills_what_is_missing() -> None:
    committed = {("A.t", 0): 20, ("A.t", 1): 5}
    translated = {("A.t", 0): 10, ("A.t", 1): 8, ("A.t", 2): 3}
    assert offsets_to_sync(False, committed, translated) == {("A.t", 1): 8, ("A.t", 2): 3}
