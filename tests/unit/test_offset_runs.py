"""Exact offset runs: maximal runs from delivery reports, and their offset-syncs records."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.offset_runs import OffsetRun, OffsetSyncRecord, RunBuilder, runs_from_pairs


@st.composite
def increasing_pairs(draw: st.DrawFn) -> list[tuple[int, int]]:
    """(upstream, downstream) pairs, strictly increasing in both, with occasional gaps."""
    up = draw(st.integers(0, 10**12))
    down = draw(st.integers(0, 10**12))
    steps = st.integers(1, 3) | st.just(1)  # mostly contiguous, sometimes a gap
    pairs = []
    for _ in range(draw(st.integers(0, 60))):
        pairs.append((up, down))
        up += draw(steps)
        down += draw(steps)
    return pairs


def _expand(runs: list[OffsetRun]) -> list[tuple[int, int]]:
    return [(r.upstream_start + i, r.downstream_start + i) for r in runs for i in range(r.count)]


@given(increasing_pairs())
def test_expanding_runs_gives_back_the_pairs(pairs) -> None:
    assert _expand(runs_from_pairs(pairs)) == pairs


@given(increasing_pairs())
def test_runs_are_maximal(pairs) -> None:
    runs = runs_from_pairs(pairs)
    assert all(r.count >= 1 for r in runs)
    for before, after in pairwise(runs):
        contiguous = (
            after.upstream_start == before.upstream_end
            and after.downstream_start == before.downstream_end
        )
        assert not contiguous, f"{before} and {after} should be one run"


def test_contiguous_pairs_make_one_run() -> None:
    runs = runs_from_pairs([(10, 100), (11, 101), (12, 102)])
    assert runs == [OffsetRun(10, 100, 3)]
    assert (runs[0].upstream_end, runs[0].downstream_end) == (13, 103)


def test_a_gap_upstream_starts_a_new_run() -> None:
    # offset 12 was never copied (compacted away, a transaction marker, ...)
    assert runs_from_pairs([(10, 100), (11, 101), (13, 102)]) == [
        OffsetRun(10, 100, 2),
        OffsetRun(13, 102, 1),
    ]


def test_a_gap_downstream_starts_a_new_run() -> None:
    assert runs_from_pairs([(10, 100), (11, 101), (12, 105), (13, 106)]) == [
        OffsetRun(10, 100, 2),
        OffsetRun(12, 105, 2),
    ]


def test_a_replayed_stretch_starts_a_new_run() -> None:
    # after a crash, upstream 5..6 copied again to 20..21
    assert runs_from_pairs([(5, 10), (6, 11), (5, 20), (6, 21)]) == [
        OffsetRun(5, 10, 2),
        OffsetRun(5, 20, 2),
    ]


def test_no_pairs_no_runs() -> None:
    assert runs_from_pairs([]) == []
    assert RunBuilder().runs() == []


def test_builder_runs_can_be_read_twice() -> None:
    builder = RunBuilder()
    builder.add(0, 7)
    builder.add(1, 8)
    assert builder.runs() == [OffsetRun(0, 7, 2)]
    assert builder.runs() == [OffsetRun(0, 7, 2)]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 4)), max_size=12))
def test_adding_a_run_at_once_equals_adding_its_pairs(chunks: list[tuple[int, int, int]]) -> None:
    at_once, pairwise = RunBuilder(), RunBuilder()
    up = down = 0
    for up_gap, down_gap, count in chunks:  # consecutive chunks, with gaps between them
        up, down = up + up_gap, down + down_gap
        at_once.add_run(up, down, count)
        for i in range(count):
            pairwise.add(up + i, down + i)
        up, down = up + count, down + count
    assert at_once.runs() == pairwise.runs()


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
records = st.builds(
    OffsetSyncRecord,
    source=names,
    topic=names,
    partition=st.integers(0, 10_000),
    run=st.builds(
        OffsetRun,
        upstream_start=st.integers(0, 2**63 - 1),
        downstream_start=st.integers(0, 2**63 - 1),
        count=st.integers(1, 2**31),
    ),
)


@given(records)
def test_offset_sync_record_round_trips_through_bytes(record) -> None:
    key, value = record.key_bytes(), record.value_bytes()
    assert isinstance(key, bytes)
    assert isinstance(value, bytes)
    assert OffsetSyncRecord.from_bytes(key, value) == record


def test_offset_sync_record_wire_format() -> None:
    record = OffsetSyncRecord("A", "orders", 3, OffsetRun(42, 7, 5))
    assert record.key_bytes() == b'["A","orders",3,42]'
    assert record.value_bytes() == b'{"downstream":7,"count":5}'


@given(records, records)
def test_keys_are_equal_exactly_when_source_topic_partition_and_start_are(a, b) -> None:
    same_slot = (a.source, a.topic, a.partition, a.run.upstream_start) == (
        b.source,
        b.topic,
        b.partition,
        b.run.upstream_start,
    )
    assert (a.key_bytes() == b.key_bytes()) is same_slot


def test_a_replayed_run_replaces_the_older_one_under_compaction() -> None:
    older = OffsetSyncRecord("A", "orders", 0, OffsetRun(100, 5, 10))
    replay = OffsetSyncRecord("A", "orders", 0, OffsetRun(100, 900, 4))
    assert older.key_bytes() == replay.key_bytes()
    assert older.value_bytes() != replay.value_bytes()
    # and no neighbouring slot collides, even with names that contain separators
    others = [
        OffsetSyncRecord("B", "orders", 0, OffsetRun(100, 5, 10)),
        OffsetSyncRecord("A", "orders2", 0, OffsetRun(100, 5, 10)),
        OffsetSyncRecord("A", "orders", 1, OffsetRun(100, 5, 10)),
        OffsetSyncRecord("A", "orders", 0, OffsetRun(101, 5, 10)),
        OffsetSyncRecord("A,orders", "0", 0, OffsetRun(100, 5, 10)),
        OffsetSyncRecord('A"', "orders", 0, OffsetRun(100, 5, 10)),
    ]
    keys = [r.key_bytes() for r in [older, *others]]
    assert len(set(keys)) == len(keys)
