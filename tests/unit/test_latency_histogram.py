"""Fixed-bucket millisecond histograms: Prometheus `le` semantics, merging, JSON round trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.engine.latency import BUCKETS_MS, Histogram


def test_a_value_on_a_bound_counts_in_that_bucket_and_above_the_last_in_inf() -> None:
    h = Histogram()
    for ms in (0, 5, 5.5, 300_000, 300_001):
        h.observe(ms)
    cumulative = dict(h.cumulative())
    assert cumulative["5"] == 2  # 0 and 5 (le="5")
    assert cumulative["10"] == 3
    assert cumulative["300000"] == 4
    assert cumulative["+Inf"] == 5 == h.count
    assert h.total == 0 + 5 + 5.5 + 300_000 + 300_001


@given(st.lists(st.floats(min_value=0, max_value=1e6), max_size=50), st.lists(st.floats(0, 1e6)))
def test_merging_equals_observing_everything_in_one(left: list[float], right: list[float]) -> None:
    a, b, both = Histogram(), Histogram(), Histogram()
    for ms in left:
        a.observe(ms)
        both.observe(ms)
    for ms in right:
        b.observe(ms)
        both.observe(ms)
    a.add(b)
    assert a.counts == both.counts
    assert Histogram.from_json(a.to_json()).counts == both.counts
    bounds = [bound for bound, _ in a.cumulative()]
    assert bounds == [*map(str, BUCKETS_MS), "+Inf"]
    counts = [count for _, count in a.cumulative()]
    assert counts == sorted(counts) and counts[-1] == len(left) + len(right)
