"""Retrying an unanswering cluster: doubling delays that start over after a success."""

from __future__ import annotations

import pytest

from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.retry import Backoff, retry_unavailable

DOWN = KafkaUnavailableError("A", "127.0.0.1:1", "Connection refused")


class Flaky:
    """Fails with DOWN `failures` times, then returns how many calls it took."""

    def __init__(self, failures: int, error: Exception = DOWN) -> None:
        self.left, self.calls, self.error = failures, 0, error

    def __call__(self) -> int:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error
        return self.calls


def _retry(action: Flaky, slept: list[float], **kwargs: object) -> int:
    return retry_unavailable(
        action,
        on_retry=lambda _e, _d: None,
        sleep=slept.append,
        **kwargs,  # type: ignore[arg-type]
    )


def test_delays_double_while_the_cluster_stays_away_and_start_over_after_a_success() -> None:
    slept: list[float] = []
    assert _retry(Flaky(4), slept) == 5
    assert slept == [1, 2, 4, 8]
    slept.clear()
    assert _retry(Flaky(1), slept) == 2
    assert slept == [1]  # a blip after the outage waits a second, not where the last one ended


def test_each_retry_is_announced_with_the_error_and_the_delay() -> None:
    seen: list[tuple[str, float]] = []
    retry_unavailable(Flaky(2), on_retry=lambda e, d: seen.append((e.cluster, d)), sleep=id)
    assert seen == [("A", 1), ("A", 2)]


def test_other_errors_are_not_retried() -> None:
    slept: list[float] = []
    error = ReplicationError("too big", cluster="A", topic="t", partition=0, offset=5)
    with pytest.raises(ReplicationError):
        _retry(Flaky(1, error), slept)
    assert slept == []


def test_a_bounded_wait_gives_up_before_a_sleep_would_pass_the_bound() -> None:
    slept: list[float] = []
    action = Flaky(100)
    with pytest.raises(KafkaUnavailableError):
        _retry(action, slept, max_wait=2.5)
    assert slept == [1, 2]  # the next delay (4 s) would end past 2.5 s
    assert action.calls == 3


def test_a_stop_request_ends_the_retrying_with_the_last_error() -> None:
    stop = {"now": False}

    def sleep(_delay: float) -> None:
        stop["now"] = True

    action = Flaky(100)
    with pytest.raises(KafkaUnavailableError):
        retry_unavailable(
            action, on_retry=lambda _e, _d: None, sleep=sleep, stopping=lambda: stop["now"]
        )
    assert action.calls == 2


def test_backoff_for_a_loop_that_cannot_block_doubles_to_a_minute_and_resets() -> None:
    backoff = Backoff()
    assert [backoff.next_delay() for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    backoff.reset()
    assert backoff.next_delay() == 1


def test_equal_first_and_max_delays_give_a_fixed_pause() -> None:
    slept: list[float] = []
    assert _retry(Flaky(3), slept, first_delay=0.1, max_delay=0.1) == 4
    assert slept == [0.1, 0.1, 0.1]
