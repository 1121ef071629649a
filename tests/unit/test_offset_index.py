"""The offset index translates positions exactly: no record lost, none delivered twice."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.offset_runs import OffsetRun, runs_from_pairs
from ferry.offsets.index import Match, OffsetIndex, RunMap

# --- a per-offset model of "later runs win" -----------------------------------------------


def _model(runs: list[OffsetRun]) -> dict[int, int]:
    mapping: dict[int, int] = {}
    for run in runs:
        for i in range(run.count):
            mapping[run.upstream_start + i] = run.downstream_start + i
    return mapping


def _model_translate(mapping: dict[int, int], position: int) -> tuple[int, Match, int]:
    if not mapping:
        return 0, Match.NOTHING, 0
    keys = sorted(mapping)
    i = bisect.bisect_left(keys, position)
    if i < len(keys):
        match = Match.EXACT if keys[i] == position else Match.GAP
        return mapping[keys[i]], match, 0
    return mapping[keys[-1]] + 1, Match.END, position - keys[-1] - 1


runs_strategy = st.lists(
    st.builds(OffsetRun, st.integers(0, 60), st.integers(0, 200), st.integers(1, 15)),
    max_size=12,
)


@given(runs_strategy, st.integers(0, 90))
def test_forward_matches_the_per_offset_model(runs: list[OffsetRun], position: int) -> None:
    index = RunMap()
    for run in runs:
        index.add(run)
    t = index.translate(position)
    assert (t.offset, t.match, t.beyond) == _model_translate(_model(runs), position)


@given(runs_strategy)
def test_runs_stay_sorted_and_disjoint(runs: list[OffsetRun]) -> None:
    index = RunMap()
    for run in runs:
        index.add(run)
    kept = index.runs()
    assert all(r.count > 0 for r in kept)
    assert all(a.upstream_end <= b.upstream_start for a, b in itertools.pairwise(kept))
    assert _model(kept) == _model(runs)


# --- simulated replication histories ---------------------------------------------------------


@dataclass
class History:
    source: list[int]  # offsets of the records the source holds (gaps: compaction, markers)
    target: list[tuple[int, int]]  # (downstream offset, upstream offset) of every copy
    runs: list[OffsetRun]  # in the order they were written
    duplicated: bool  # some batch was copied twice


@st.composite
def histories(draw: st.DrawFn) -> History:
    """Batches copied in order; a batch may crash after copying and be copied again.

    A crash can come before or after its runs were written. Target offsets may skip
    (transaction markers of the target) and the source has gaps.
    """
    source: list[int] = []
    offset = draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 40))):
        source.append(offset)
        offset += draw(st.sampled_from([1, 1, 1, 2, 4]))
    target: list[tuple[int, int]] = []
    runs: list[OffsetRun] = []
    down = draw(st.integers(0, 5))
    i = 0
    duplicated = False
    while i < len(source):
        size = draw(st.integers(1, 8))
        batch = source[i : i + size]
        attempts = draw(st.sampled_from([1, 1, 1, 2]))
        duplicated = duplicated or attempts > 1
        for attempt in range(attempts):
            pairs = []
            for upstream in batch:
                pairs.append((upstream, down))
                target.append((down, upstream))
                down += draw(st.sampled_from([1, 1, 1, 2]))
            last = attempt == attempts - 1
            if last or draw(st.booleans()):  # a crashed attempt may have written its runs
                runs.extend(runs_from_pairs(pairs))
        i += size
    return History(source, target, runs, duplicated)


@given(histories(), st.integers(0, 200))
def test_failover_delivers_exactly_the_records_not_yet_consumed(h: History, pos: int) -> None:
    index = OffsetIndex(h.runs)
    start = index.downstream(pos).offset
    delivered = [up for down, up in h.target if down >= start]
    unconsumed = [o for o in h.source if o >= pos]
    # Nothing consumed on the source comes again, nothing unconsumed is missing. Copies
    # that replication itself made twice (at-least-once) stay twice: a consumer that never
    # failed over sees them too.
    assert sorted(set(delivered)) == unconsumed
    assert all(up >= pos for up in delivered)
    if not h.duplicated:
        assert delivered == unconsumed


@given(histories(), st.integers(0, 200))
def test_failback_never_skips_a_record_and_is_exact_without_duplicates(
    h: History, pos: int
) -> None:
    index = OffsetIndex(h.runs)
    resume = index.upstream(pos).offset
    seen = [up for down, up in h.target if down < pos]
    unseen = [o for o in h.source if not seen or o > max(seen)]
    assert not unseen or resume <= unseen[0]  # nothing unseen is skipped
    if not h.duplicated:
        assert [o for o in h.source if o >= resume] == unseen


@given(histories(), st.integers(0, 200), st.integers(0, 200))
def test_translation_is_monotonic_both_ways(h: History, a: int, b: int) -> None:
    index = OffsetIndex(h.runs)
    low, high = min(a, b), max(a, b)
    assert index.downstream(low).offset <= index.downstream(high).offset
    if not h.duplicated:
        # With a replayed batch the target holds a stretch twice: a consumer past the first
        # copy resumes on the source at the replay's start, behind one still inside it (it has
        # not read the replay yet). Failback's rule there is "never skip", tested above.
        assert index.upstream(low).offset <= index.upstream(high).offset


@given(histories(), st.integers(0, 200))
def test_never_beyond_what_is_replicated(h: History, pos: int) -> None:
    index = OffsetIndex(h.runs)
    if not h.runs:
        return
    t = index.downstream(pos)
    assert t.offset <= max(r.downstream_end for r in h.runs)
    assert t.offset <= index.downstream(10**9).offset


# --- the cases a failover test meets -----------------------------------------------------------


def test_positions_at_the_edges() -> None:
    # upstream 0..9 -> 100..109; 10..11 compacted away; 12..14 -> 110..112
    index = OffsetIndex([OffsetRun(0, 100, 10), OffsetRun(12, 110, 3)])
    assert index.downstream(0).offset == 100  # beginning
    assert index.downstream(5).offset == 105
    assert index.downstream(10).offset == 110  # inside the gap: the next copied record
    assert index.downstream(10).match is Match.GAP
    assert index.downstream(15).offset == 113  # end
    assert index.downstream(15).match is Match.END
    assert index.downstream(18).beyond == 3  # three offsets not replicated (yet)
    assert index.upstream(100).offset == 0
    assert index.upstream(110).offset == 12
    assert index.upstream(113).offset == 15
    assert index.replicated_end() == 15


def test_a_position_behind_the_first_run_maps_to_the_first_copy() -> None:
    # retention deleted 0..19 on the source before ferry copied anything
    index = OffsetIndex([OffsetRun(20, 0, 5)])
    assert index.downstream(3).offset == 0
    assert index.downstream(3).match is Match.GAP


def test_an_empty_index_maps_to_the_start() -> None:
    index = OffsetIndex()
    assert index.downstream(7).offset == 0
    assert index.downstream(7).match is Match.NOTHING
    assert index.replicated_end() is None


def test_a_replayed_batch_replaces_the_first_copy() -> None:
    index = OffsetIndex([OffsetRun(0, 0, 10), OffsetRun(0, 10, 10), OffsetRun(10, 20, 5)])
    assert index.downstream(0).offset == 10
    assert index.downstream(9).offset == 19
    assert index.downstream(10).offset == 20
    # the first copy still maps back for a consumer that stopped inside it
    assert index.upstream(4).offset == 4


def test_a_partial_overlap_keeps_the_rest_of_the_older_run() -> None:
    runs = RunMap()
    runs.add(OffsetRun(0, 0, 10))
    runs.add(OffsetRun(3, 50, 4))
    assert runs.runs() == [OffsetRun(0, 0, 3), OffsetRun(3, 50, 4), OffsetRun(7, 7, 3)]
