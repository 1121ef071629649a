"""The sliding-window sync-delay detector (`ferry.monitor.sync_delay`).

The worked numbers are the seed's: A's log end near 10,000 with a group at 8,000, B's copy
near 5,000 and 3,000. Absolute values differ between clusters; only growth is compared, one
period of A (A[times-2] - A[times-3]) against three of B (B[times] - B[times-3]).
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given
from hypothesis import strategies as st

from ferry.monitor.sync_delay import Alert, DelayKind, OffsetWindow, SyncDelayDetector

LATEST, CONSUME = DelayKind.LATEST, DelayKind.CONSUME
KEY = ("A->B", "orders", 0)
GROUP_KEY = ("A->B", "billing", "orders", 0)


def _detector(latest: int = 0, consume: int = 0) -> SyncDelayDetector:
    return SyncDelayDetector(min_delay_latest_offset=latest, min_delay_consume_offset=consume)


def _feed(
    detector: SyncDelayDetector,
    samples: Iterable[tuple[int, int]],
    kind: DelayKind = LATEST,
    key: tuple[object, ...] = KEY,
) -> list[Alert | None]:
    return [detector.observe(kind, key, a, b) for a, b in samples]


def _steps(start: int, growth: list[int]) -> list[int]:
    """Offsets starting at `start` that grow by each of `growth` in turn."""
    out = [start]
    for g in growth:
        out.append(out[-1] + g)
    return out


# --- the seed's worked numbers ---------------------------------------------------------------


def test_b_growing_as_fast_as_a_raises_no_alert() -> None:
    a = _steps(10_000, [100, 100, 100, 100, 100])
    b = _steps(5_000, [100, 100, 100, 100, 100])
    assert _feed(_detector(), zip(a, b, strict=True)) == [None] * 6


def test_b_copying_one_period_of_a_within_three_periods_raises_no_alert() -> None:
    """B may run two periods late: a sync can start just before a sample and take > 1 s."""
    a = _steps(10_000, [100, 0, 0, 100, 0, 0])
    b = _steps(5_000, [0, 0, 100, 0, 0, 100])  # each of A's steps lands two periods later
    assert _feed(_detector(), zip(a, b, strict=True)) == [None] * 7


def test_b_stalled_while_a_grows_raises_a_latest_alert_with_its_numbers() -> None:
    a = _steps(10_000, [100, 100, 100])
    b = [5_000] * 4
    assert _feed(_detector(), zip(a, b, strict=True)) == [
        None,
        None,
        None,
        Alert(LATEST, a_sub=100, b_sub=0, threshold=0),
    ]


def test_b_growing_less_than_a_did_in_one_period_raises_an_alert() -> None:
    a = _steps(10_000, [300, 300, 300])
    b = _steps(5_000, [50, 50, 50])
    assert _feed(_detector(), zip(a, b, strict=True))[-1] == Alert(LATEST, 300, 150, 0)


def test_b_growing_exactly_as_much_as_a_is_in_sync() -> None:
    """The rule is B[times] - B[times-3] < A_sub: equal growth is no delay."""
    a = _steps(10_000, [300, 0, 0])
    b = _steps(5_000, [100, 100, 100])
    assert _feed(_detector(), zip(a, b, strict=True))[-1] is None


def test_consume_offsets_stalled_on_b_raise_a_consume_alert() -> None:
    a = _steps(8_000, [40, 40, 40])
    b = [3_000] * 4
    alerts = _feed(_detector(), zip(a, b, strict=True), CONSUME, GROUP_KEY)
    assert alerts[-1] == Alert(CONSUME, a_sub=40, b_sub=0, threshold=0)


def test_latest_and_consume_series_use_their_own_thresholds() -> None:
    detector = _detector(latest=500, consume=10)
    a = _steps(10_000, [100, 100, 100])
    assert _feed(detector, zip(a, [5_000] * 4, strict=True), LATEST)[-1] is None
    consume = _feed(detector, zip(a, [3_000] * 4, strict=True), CONSUME, GROUP_KEY)
    assert consume[-1] == Alert(CONSUME, 100, 0, threshold=10)


# --- when the rule may fire -----------------------------------------------------------------


def test_no_alert_before_the_fourth_sample_even_if_b_never_moves() -> None:
    detector = _detector()
    a = _steps(10_000, [1_000, 1_000])
    assert _feed(detector, zip(a, [5_000] * 3, strict=True)) == [None, None, None]
    assert detector.alerting() == {}
    assert detector.observe(LATEST, KEY, 13_000, 5_000) is not None


def test_no_traffic_on_a_never_alerts() -> None:
    samples = [(10_000, 5_000)] * 50
    assert _feed(_detector(), samples) == [None] * 50


def test_traffic_at_or_below_the_threshold_never_alerts() -> None:
    detector = _detector(latest=100)
    for growth in (100, 99, 1, 0):
        key = ("A->B", "orders", growth)
        a = _steps(10_000, [growth] * 10)
        assert _feed(detector, zip(a, [5_000] * 11, strict=True), key=key) == [None] * 11
    a = _steps(10_000, [101] * 3)
    assert _feed(detector, zip(a, [5_000] * 4, strict=True))[-1] == Alert(LATEST, 101, 0, 100)


def test_b_catching_up_clears_the_alert_on_the_next_sample() -> None:
    detector = _detector()
    a = _steps(10_000, [100] * 4)
    alerts = _feed(detector, zip(a[:4], [5_000] * 4, strict=True))
    assert alerts[-1] == Alert(LATEST, 100, 0, 0)
    assert detector.alerting() == {(LATEST, KEY): alerts[-1]}

    assert detector.observe(LATEST, KEY, a[4], 5_400) is None  # the copy caught up
    assert detector.alerting() == {}


def test_an_alert_lasts_while_b_stays_behind() -> None:
    detector = _detector()
    a = _steps(10_000, [100] * 8)
    alerts = _feed(detector, zip(a, [5_000] * 9, strict=True))
    assert alerts[:3] == [None] * 3
    assert all(alert == Alert(LATEST, 100, 0, 0) for alert in alerts[3:])


def test_a_going_backwards_restarts_the_window() -> None:
    """A topic deleted and recreated: offsets before and after are not comparable."""
    detector = _detector()
    a = _steps(10_000, [100] * 3)
    assert _feed(detector, zip(a, [5_000] * 4, strict=True))[-1] is not None

    recreated = _steps(0, [100] * 3)
    after = _feed(detector, zip(recreated, [5_000] * 4, strict=True))
    assert after[:3] == [None] * 3, "three samples to refill the window"
    assert after[3] == Alert(LATEST, 100, 0, 0), "then the rule applies to the new topic"


def test_series_are_independent_and_forget_drops_one() -> None:
    detector = _detector()
    other = ("A->B", "orders", 1)
    a = _steps(10_000, [100] * 3)
    _feed(detector, zip(a, [5_000] * 4, strict=True))
    _feed(detector, zip(a, _steps(5_000, [100] * 3), strict=True), key=other)
    assert set(detector.alerting()) == {(LATEST, KEY)}

    detector.forget(LATEST, KEY)
    assert detector.alerting() == {}
    # A forgotten series starts a fresh window.
    assert _feed(detector, zip(a[:3], [5_000] * 3, strict=True)) == [None] * 3


# --- long runs --------------------------------------------------------------------------------


def test_ten_thousand_samples_keep_a_four_slot_window_and_the_rule_still_works() -> None:
    detector = _detector()
    a, b = 10_000, 5_000
    for _ in range(10_000):
        a, b = a + 100, b + 100
        assert detector.observe(LATEST, KEY, a, b) is None
    for step in range(3):
        a += 100
        alert = detector.observe(LATEST, KEY, a, b)
        # B's window still holds one period of growth for the first two stalled samples.
        assert alert == (None if step < 2 else Alert(LATEST, 100, 0, 0))
    assert detector.observe(LATEST, KEY, a + 100, b + 1_000) is None


def test_after_thousands_of_samples_a_stall_is_caught_as_on_the_first_day() -> None:
    """The window is circular: however many samples came before, the rule reads the last four
    (nothing grows without bound, nothing drifts)."""
    window, fresh = OffsetWindow(), OffsetWindow()
    for n in range(10_003):
        assert window.add(n * 10, n * 10, kind=LATEST, threshold=0) is None
    a, b = 10_003 * 10, 10_002 * 10  # from now on B is stalled while A grows by 10 a period
    fresh_start = [fresh.add(i * 10, i * 10, kind=LATEST, threshold=0) for i in range(4)]
    assert fresh_start == [None] * 4
    stalled = [window.add(a + i * 10, b, kind=LATEST, threshold=0) for i in range(4)]
    fresh_stalled = [fresh.add(40 + i * 10, 30, kind=LATEST, threshold=0) for i in range(4)]
    assert stalled == fresh_stalled
    assert stalled[-1] is not None


# --- property ---------------------------------------------------------------------------------

growths = st.lists(st.integers(0, 10**6), min_size=1, max_size=60)


@given(growths, st.lists(st.integers(0, 10**6), max_size=60), st.integers(0, 10**3))
def test_b_growing_at_least_as_much_as_a_each_period_never_alerts(
    a_growth: list[int], extra: list[int], threshold: int
) -> None:
    detector = _detector(latest=threshold, consume=threshold)
    b_growth = [g + (extra[i] if i < len(extra) else 0) for i, g in enumerate(a_growth)]
    a = _steps(10_000, a_growth)
    b = _steps(5_000, b_growth)
    for kind in (LATEST, CONSUME):
        assert _feed(detector, zip(a, b, strict=True), kind) == [None] * len(a)
    assert detector.alerting() == {}


@given(growths, st.integers(0, 2))
def test_b_copying_each_period_of_a_up_to_two_periods_late_never_alerts(
    a_growth: list[int], delay: int
) -> None:
    detector = _detector()
    b_growth = ([0] * delay + a_growth)[: len(a_growth)]
    a = _steps(10_000, a_growth)
    b = _steps(5_000, b_growth)
    assert _feed(detector, zip(a, b, strict=True)) == [None] * len(a)
