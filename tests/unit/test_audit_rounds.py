"""The continuous audit's window and alert rules (ferry.monitor.audit_rounds), no I/O."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.monitor.audit_rounds import AuditAlerts, closed_until


@given(st.integers(0, 2**45), st.integers(1, 86_400_000))
def test_the_window_ends_where_the_open_bucket_starts(now_ms: int, width_ms: int) -> None:
    until = closed_until(now_ms, width_ms)
    assert until % width_ms == 0  # a bucket boundary
    assert until <= now_ms < until + width_ms  # the bucket holding now is the one left out


def test_a_loss_alerts_once_then_recovers_when_repaired() -> None:
    alerts = AuditAlerts()
    assert alerts.judge("A->B", {"orders": 0}).raised == ()
    assert alerts.judge("A->B", {"orders": 10}).raised == ("orders",)
    assert alerts.judge("A->B", {"orders": 10}).raised == ()  # the same loss, still there
    assert alerts.alerting("A->B") == {"orders"}
    again = alerts.judge("A->B", {"orders": 12})
    assert again.raised == ("orders",)  # two more: a new loss
    assert alerts.judge("A->B", {"orders": 0}).recovered == ("orders",)
    assert alerts.alerting("A->B") == set()


def test_a_topic_no_longer_audited_is_gone_and_recovers_if_it_was_alerting() -> None:
    alerts = AuditAlerts()
    alerts.judge("A->B", {"orders": 3, "pay": 0})
    verdict = alerts.judge("A->B", {})
    assert set(verdict.gone) == {"orders", "pay"}
    assert verdict.recovered == ("orders",)


def test_flows_are_judged_apart() -> None:
    alerts = AuditAlerts()
    alerts.judge("A->B", {"orders": 3})
    assert alerts.judge("B->A", {"orders": 3}).raised == ("orders",)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_a_topic_alerts_while_records_are_missing_and_every_loss_is_announced(
    counts: list[int],
) -> None:
    alerts = AuditAlerts()
    announced = 0  # missing records covered by an alert since the last recovery
    for n in counts:
        verdict = alerts.judge("A->B", {"t": n})
        assert (alerts.alerting("A->B") == {"t"}) == (n > 0)
        assert not (verdict.raised and verdict.recovered)
        if verdict.raised:
            announced = n
        if verdict.recovered:
            announced = 0
        assert n <= announced or n == 0  # no count went up without an alert
