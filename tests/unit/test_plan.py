"""Batch planning: admission control (`admit`) and sticky, balanced bins (`pack_bins`).

Property tests check the invariants stated in `ferry.engine.plan.batches`'s docstrings; the worked
examples pin down the arithmetic on small cases that can be checked by hand.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from ferry.engine.plan.batches import DEFAULT_RECORD_BYTES, TP, PartitionRange, admit, pack_bins

EPS = 1e-6  # relative tolerance for float loads and scales

tps = st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 7))


@st.composite
def backlogs(draw: st.DrawFn) -> tuple[dict[TP, int], dict[TP, int], dict[TP, float]]:
    """(start, latest, record_bytes) with start <= latest; some partitions have no size."""
    parts = draw(st.lists(tps, min_size=1, max_size=12, unique=True))
    start = {tp: draw(st.integers(0, 10**6)) for tp in parts}
    latest = {tp: start[tp] + draw(st.integers(0, 10**5)) for tp in parts}
    sized = draw(st.lists(st.sampled_from(parts), unique=True))
    record_bytes = {tp: float(draw(st.integers(1, 10_000))) for tp in sized}
    return start, latest, record_bytes


def _size(record_bytes: dict[TP, float], tp: TP) -> float:
    return record_bytes.get(tp, DEFAULT_RECORD_BYTES)


# --- admit -----------------------------------------------------------------------------------


@given(backlogs(), st.none() | st.integers(1, 10**6), st.none() | st.integers(1, 10**9))
def test_admit_stays_between_start_and_latest(backlog, max_records, max_bytes) -> None:
    start, latest, record_bytes = backlog
    ends = admit(
        start, latest, max_records=max_records, max_bytes=max_bytes, record_bytes=record_bytes
    )
    assert ends.keys() == latest.keys()
    for tp, end in ends.items():
        assert start[tp] <= end <= latest[tp]
        if latest[tp] > start[tp]:
            assert end > start[tp], f"lagging partition {tp} got no record"


@given(backlogs(), st.none() | st.integers(1, 10**6), st.none() | st.integers(1, 10**9))
def test_admit_respects_caps_up_to_one_record_per_partition(
    backlog, max_records, max_bytes
) -> None:
    """Beyond the caps, only the guaranteed first record of each partition may be admitted."""
    start, latest, record_bytes = backlog
    ends = admit(
        start, latest, max_records=max_records, max_bytes=max_bytes, record_bytes=record_bytes
    )
    extra = {tp: ends[tp] - start[tp] - 1 for tp in ends if ends[tp] > start[tp]}
    if max_records is not None:
        assert sum(extra.values()) <= max_records
    if max_bytes is not None:
        extra_bytes = sum(n * _size(record_bytes, tp) for tp, n in extra.items())
        assert extra_bytes <= max_bytes * (1 + EPS)


@given(backlogs(), st.none() | st.integers(1, 10**6), st.none() | st.integers(1, 10**9))
def test_admit_shares_are_proportional_to_lag(backlog, max_records, max_bytes) -> None:
    start, latest, record_bytes = backlog
    lag = {tp: latest[tp] - start[tp] for tp in latest}
    scale = 1.0
    if max_records is not None and sum(lag.values()):
        scale = min(scale, max_records / sum(lag.values()))
    total_bytes = sum(n * _size(record_bytes, tp) for tp, n in lag.items())
    if max_bytes is not None and total_bytes:
        scale = min(scale, max_bytes / total_bytes)
    ends = admit(
        start, latest, max_records=max_records, max_bytes=max_bytes, record_bytes=record_bytes
    )
    for tp, n in lag.items():
        if n == 0:
            continue
        share = n * scale
        got = ends[tp] - start[tp]
        assert share * (1 - EPS) - 1 < got <= max(1.0, share * (1 + EPS)), (tp, n, scale, got)


@given(backlogs())
def test_admit_without_caps_reads_everything(backlog) -> None:
    start, latest, record_bytes = backlog
    assert admit(start, latest, max_records=None, max_bytes=None, record_bytes=record_bytes) == (
        latest
    )


@given(backlogs())
def test_admit_under_the_caps_reads_everything(backlog) -> None:
    start, latest, record_bytes = backlog
    records = sum(latest[tp] - start[tp] for tp in latest)
    size = sum((latest[tp] - start[tp]) * _size(record_bytes, tp) for tp in latest)
    ends = admit(
        start, latest, max_records=records + 1, max_bytes=int(size) + 1, record_bytes=record_bytes
    )
    assert ends == latest


def test_admit_splits_the_record_cap_in_proportion_to_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 1000}
    latest = {("t", 0): 900, ("t", 1): 1100}
    ends = admit(start, latest, max_records=100, max_bytes=None, record_bytes={})
    assert ends == {("t", 0): 90, ("t", 1): 1010}


def test_a_hot_partition_does_not_starve_a_cold_one() -> None:
    start = {("hot", 0): 0, ("cold", 0): 50}
    latest = {("hot", 0): 1_000_000, ("cold", 0): 53}
    ends = admit(start, latest, max_records=10, max_bytes=None, record_bytes={})
    # scale = 10 / 1_000_003: hot gets floor(9.99997) = 9, cold floor(0.00003) -> at least 1
    assert ends == {("hot", 0): 9, ("cold", 0): 51}


def test_admit_byte_cap_uses_per_partition_record_sizes() -> None:
    start = {("big", 0): 0, ("small", 0): 0}
    latest = {("big", 0): 100, ("small", 0): 100}
    sizes = {("big", 0): 1000.0, ("small", 0): 10.0}
    # 101_000 estimated bytes against a 10_100 cap: scale 0.1
    ends = admit(start, latest, max_records=None, max_bytes=10_100, record_bytes=sizes)
    assert ends == {("big", 0): 10, ("small", 0): 10}


def test_admit_tighter_cap_wins_and_unknown_sizes_use_the_default() -> None:
    start = {("t", 0): 0}
    latest = {("t", 0): 100}
    by_bytes = admit(start, latest, max_records=50, max_bytes=20 * 1024, record_bytes={})
    assert by_bytes == {("t", 0): 20}
    by_records = admit(start, latest, max_records=5, max_bytes=20 * 1024, record_bytes={})
    assert by_records == {("t", 0): 5}


def test_admit_never_moves_backwards_when_start_is_past_latest() -> None:
    start = {("t", 0): 500, ("t", 1): 0}
    latest = {("t", 0): 100, ("t", 1): 1000}
    ends = admit(start, latest, max_records=10, max_bytes=None, record_bytes={})
    assert ends == {("t", 0): 500, ("t", 1): 10}


# --- pack_bins -------------------------------------------------------------------------------


@st.composite
def packings(draw: st.DrawFn):
    """(ranges, bins, record_bytes, previous, slack, spread); ranges have distinct partitions."""
    parts = draw(st.lists(tps, max_size=16, unique=True))
    ranges = []
    for topic, partition in parts:
        begin = draw(st.integers(0, 10**6))
        count = draw(st.integers(0, 2000))
        ranges.append(PartitionRange(topic, partition, begin, begin + count, f"A.{topic}"))
    record_bytes = {tp: float(draw(st.integers(1, 5000))) for tp in parts if draw(st.booleans())}
    previous = {tp: draw(st.integers(0, 20)) for tp in parts if draw(st.booleans())}
    bins = draw(st.integers(1, 20))
    slack = draw(st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]))
    return ranges, bins, record_bytes, previous, slack, draw(st.booleans())


def _weight(r: PartitionRange, record_bytes: dict[TP, float]) -> float:
    return r.count * _size(record_bytes, r.tp)


def _loads(packed: list[list[PartitionRange]], record_bytes: dict[TP, float]) -> list[float]:
    return [sum(_weight(r, record_bytes) for r in b) for b in packed]


@given(packings())
def test_every_non_empty_range_lands_in_exactly_one_of_at_most_bins_bins(packing) -> None:
    ranges, bins, record_bytes, previous, slack, spread = packing
    packed = pack_bins(
        ranges, bins, record_bytes=record_bytes, previous=previous, slack=slack, spread=spread
    )
    non_empty = [r for r in ranges if r.count > 0]
    assert Counter(r for b in packed for r in b) == Counter(non_empty)
    assert len(packed) <= bins
    assert len(packed) <= len(non_empty)
    if non_empty:
        assert packed, "non-empty work packed into no bin"


@given(packings())
def test_no_bin_exceeds_ideal_by_more_than_slack_plus_one_range(packing) -> None:
    ranges, bins, record_bytes, previous, slack, spread = packing
    packed = pack_bins(
        ranges, bins, record_bytes=record_bytes, previous=previous, slack=slack, spread=spread
    )
    if not packed:
        return
    weights = [_weight(r, record_bytes) for r in ranges if r.count > 0]
    ideal = sum(weights) / len(packed)
    bound = (1 + slack) * ideal + max(weights)
    assert max(_loads(packed, record_bytes)) <= bound * (1 + EPS)


@given(packings())
def test_a_range_leaves_its_previous_bin_only_if_it_would_overload_it(packing) -> None:
    ranges, bins, record_bytes, previous, slack, spread = packing
    packed = pack_bins(
        ranges, bins, record_bytes=record_bytes, previous=previous, slack=slack, spread=spread
    )
    if not packed:
        return
    loads = _loads(packed, record_bytes)
    limit = (1 + slack) * sum(loads) / len(packed)
    for index, b in enumerate(packed):
        for r in b:
            home = previous.get(r.tp)
            if home is None or home >= len(packed) or home == index:
                continue
            # The home bin's final load is at least its load when r was placed.
            assert loads[home] + _weight(r, record_bytes) > limit * (1 - EPS), (r, home)


@given(packings())
def test_repacking_with_the_last_assignment_keeps_it_when_it_fits(packing) -> None:
    ranges, bins, record_bytes, _previous, slack, spread = packing
    first = pack_bins(ranges, bins, record_bytes=record_bytes, slack=slack, spread=spread)
    if not first:
        return
    loads = _loads(first, record_bytes)
    if max(loads) > (1 + slack) * sum(loads) / len(first) * (1 - EPS):
        return  # some bin is over the sticky limit: its ranges may move
    previous = {r.tp: i for i, b in enumerate(first) for r in b}
    again = pack_bins(
        ranges, bins, record_bytes=record_bytes, previous=previous, slack=slack, spread=spread
    )
    assert [set(b) for b in again] == [set(b) for b in first]


def _ranges(**counts: int) -> list[PartitionRange]:
    return [PartitionRange(t, 0, 0, n, f"A.{t}") for t, n in counts.items()]


def _names(packed: list[list[PartitionRange]]) -> list[list[str]]:
    return [[r.topic for r in b] for b in packed]


def test_pack_bins_is_largest_first_to_the_lightest_bin() -> None:
    ranges = _ranges(e=1, c=4, a=7, d=3, b=5)
    packed = pack_bins(ranges, 2, record_bytes={(t, 0): 1.0 for t in "abcde"})
    # 7 -> bin 0; 5 -> bin 1; 4 -> bin 1 (5 < 7); 3 -> bin 0 (7 < 9); 1 -> bin 1 (9 < 10)
    assert _names(packed) == [["a", "d"], ["b", "c", "e"]]


def test_spread_gives_live_partitions_beside_a_backlog_a_bin_each() -> None:
    # A lease's first plan: eight partitions with a backlog of about 37,500 records each (not
    # quite equal), eight with live traffic and nothing to catch up on (weight 1).
    backlog = [PartitionRange("backlog", p, 0, 37_400 + 30 * p, "A.backlog") for p in range(8)]
    live = [PartitionRange("live", p, 0, 1, "A.live") for p in range(8)]
    sizes = {r.tp: 1.0 for r in backlog + live}
    lpt = pack_bins(backlog + live, 8, record_bytes=sizes)
    spread = pack_bins(backlog + live, 8, record_bytes=sizes, spread=True)
    live_per_bin = [sum(r.topic == "live" for r in b) for b in spread]
    assert live_per_bin == [1] * 8
    assert [sum(r.topic == "backlog" for r in b) for b in spread] == [1] * 8
    assert max(sum(r.topic == "live" for r in b) for b in lpt) == 8  # LPT: all in the lightest


def test_spread_still_gives_a_lagging_partition_a_bin_of_its_own() -> None:
    # The placement benchmark's backlog: 400,000 records on one partition, 40,000 on seven.
    ranges = [PartitionRange("t", 0, 0, 400_000, "A.t")] + [
        PartitionRange("t", p, 0, 40_000, "A.t") for p in range(1, 8)
    ]
    packed = pack_bins(ranges, 2, record_bytes={}, spread=True)
    assert [[r.partition for r in b] for b in packed] == [[0], [1, 2, 3, 4, 5, 6, 7]]


def test_spread_balances_counts_only_within_the_slack() -> None:
    ranges = _ranges(a=100, b=10, c=10, d=10, e=10, f=10, g=10, h=10, i=10, j=10, k=10)
    packed = pack_bins(ranges, 2, record_bytes={}, spread=True)
    # ideal 100, within the slack 125: a goes first; the tens then alternate by count while
    # bin 0 has room (110, 120), and the rest go to bin 1: counts 3 and 8, loads 120 and 80.
    assert [sum(r.count for r in b) for b in packed] == [120, 80]
    assert _names(packed)[0][0] == "a"


def test_sticky_ranges_go_home_until_the_home_bin_is_full() -> None:
    ranges = _ranges(a=100, b=100, c=100, d=100)
    previous = {(t, 0): 1 for t in "abcd"}
    packed = pack_bins(
        ranges, 2, record_bytes={(t, 0): 1.0 for t in "abcd"}, previous=previous, slack=0.25
    )
    # ideal 200, limit 250: a and b fit in bin 1, c and d would overload it
    assert _names(packed) == [["c", "d"], ["a", "b"]]


def test_sticky_previous_bin_beyond_the_bin_count_is_ignored() -> None:
    ranges = _ranges(a=10, b=10)
    packed = pack_bins(ranges, 2, record_bytes={}, previous={("a", 0): 5, ("b", 0): 0}, slack=0.25)
    assert _names(packed) == [["b"], ["a"]]


def test_pack_bins_drops_empty_ranges_and_caps_bins_at_the_range_count() -> None:
    ranges = [*_ranges(a=3, b=0, c=2), PartitionRange("d", 0, 5, 5, "A.d")]
    packed = pack_bins(ranges, 8, record_bytes={})
    assert sorted(_names(packed)) == [["a"], ["c"]]
    assert pack_bins(_ranges(a=0, b=0), 4, record_bytes={}) == []
    assert pack_bins([], 4, record_bytes={}) == []


def test_pack_bins_weighs_unknown_partitions_at_the_default_record_size() -> None:
    # x: 10 records at the 1024-byte default = 10240; y: 100 x 100 = 10000; z: 240
    ranges = _ranges(x=10, y=100, z=1)
    packed = pack_bins(ranges, 2, record_bytes={("y", 0): 100.0, ("z", 0): 240.0})
    assert _names(packed) == [["x"], ["y", "z"]]


def test_range_start_decides_from_the_batch_offsets_alone() -> None:
    from ferry.engine.plan.batches import EARLIEST, range_start

    assert range_start(None, 10) == EARLIEST  # a new partition: from its earliest record
    assert range_start(None, 0) is None  # new and empty
    assert range_start(5, 10) == 5
    assert range_start(10, 10) is None  # nothing new
    assert range_start(100, 7) == EARLIEST  # end below progress: recreated, copy from start
    assert range_start(100, 0) is None  # recreated and empty
