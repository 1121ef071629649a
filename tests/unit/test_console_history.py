"""The console's last hour per flow: bounded, windowed, and rates per interval."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.api.history import History, Sample


def _sample(at: float, records: int = 0, lag: int | None = 0) -> Sample:
    return Sample(at, lag, records, records * 100, records * 2.0, records)


@given(st.integers(min_value=0, max_value=400))
def test_the_ring_never_holds_more_than_the_window_needs(count: int) -> None:
    history = History(window_seconds=60, interval_seconds=1)
    for i in range(count):
        history.add("A->B", _sample(float(i)))
    kept = history.samples("A->B", now=float(count))
    assert len(kept) <= 61
    assert [s.at for s in kept] == [float(i) for i in range(max(0, count - 60), count)]


def test_points_are_per_interval_rates_not_means_over_the_flows_life() -> None:
    history = History()
    history.add("A->B", Sample(1000.0, 500, 0, 0, 0.0, 0))
    history.add("A->B", Sample(1010.0, 200, 300, 30_000, 3_000.0, 300))  # 10 ms each
    history.add("A->B", Sample(1020.0, 0, 400, 40_000, 8_000.0, 400))  # 50 ms each
    history.add("A->B", Sample(1030.0, 0, 400, 40_000, 8_000.0, 400))  # idle
    points = history.points("A->B", now=1030.0)
    assert [p["lag"] for p in points] == [500, 200, 0, 0]
    assert [p["records_per_second"] for p in points] == [None, 30.0, 10.0, 0.0]
    assert [p["bytes_per_second"] for p in points] == [None, 3000.0, 1000.0, 0.0]
    assert [p["latency_ms"] for p in points] == [None, 10.0, 50.0, None]


def test_a_counter_that_went_back_gives_no_rate_rather_than_a_negative_one() -> None:
    history = History()
    history.add("A->B", _sample(0.0, records=1000))
    history.add("A->B", _sample(5.0, records=10))  # the state dir was reset
    assert history.points("A->B", now=5.0)[1]["records_per_second"] is None


def test_flows_are_kept_apart_and_an_unknown_flow_has_no_points() -> None:
    history = History()
    history.add("A->B", _sample(0.0, lag=7))
    history.add("B->A", _sample(0.0, lag=9))
    assert [p["lag"] for p in history.points("B->A", now=1.0)] == [9]
    assert history.points("C->A", now=1.0) == []
