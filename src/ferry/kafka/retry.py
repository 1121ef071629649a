"""Retrying what failed because a cluster did not answer: exponential backoff that starts over.

Delays double from 1 s to at most 60 s while a cluster stays away, and start again from 1 s
after the next success, so a blip after a long healthy stretch waits a second, not a minute.
`retry_unavailable` blocks and retries one action (built on tenacity); `Backoff` gives the same
delays to a loop that cannot block, such as the runner restarting a flow's query.
Only `KafkaUnavailableError` is retried: every other error is a fact a retry cannot change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_before_delay,
    stop_never,
    wait_exponential,
)
from tenacity.stop import stop_base

from ferry.errors import KafkaUnavailableError

__all__ = ["FIRST_DELAY_SECONDS", "MAX_DELAY_SECONDS", "Backoff", "retry_unavailable"]

T = TypeVar("T")

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 60.0


def _delays(
    first: float = FIRST_DELAY_SECONDS, most: float = MAX_DELAY_SECONDS
) -> wait_exponential:
    return wait_exponential(multiplier=first, max=most)


class Backoff:
    """The delay before the next attempt after each failure in a row; `reset` on success."""

    def __init__(self) -> None:
        self._failures = 0

    def next_delay(self) -> float:
        # The same schedule as `retry_unavailable`'s (tenacity's wait_exponential).
        self._failures += 1
        return min(MAX_DELAY_SECONDS, FIRST_DELAY_SECONDS * 2.0 ** (self._failures - 1))

    def reset(self) -> None:
        self._failures = 0

    @property
    def failures(self) -> int:
        return self._failures


class _StopWhen(stop_base):
    def __init__(self, stopping: Callable[[], bool]) -> None:
        self._stopping = stopping

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._stopping()


def retry_unavailable(
    action: Callable[[], T],
    *,
    on_retry: Callable[[KafkaUnavailableError, float], None],
    sleep: Callable[[float], None],
    stopping: Callable[[], bool] = lambda: False,
    max_wait: float | None = None,
    first_delay: float = FIRST_DELAY_SECONDS,
    max_delay: float = MAX_DELAY_SECONDS,
) -> T:
    """`action()` until it returns; a `KafkaUnavailableError` is retried after `on_retry(error,
    delay)` and `sleep(delay)`. Gives up, raising the last error, once `stopping()` says so or
    the next attempt would start more than `max_wait` seconds after the first. Delays double
    from `first_delay` to `max_delay` (equal: a fixed pause, for a short deadline)."""
    stop = _StopWhen(stopping) | (stop_never if max_wait is None else stop_before_delay(max_wait))
    retrying = Retrying(
        retry=retry_if_exception_type(KafkaUnavailableError),
        wait=_delays(first_delay, max_delay),
        stop=stop,
        sleep=sleep,
        before_sleep=lambda state: on_retry(_error(state), _next_sleep(state)),
        reraise=True,
    )
    return retrying(action)


def _error(state: RetryCallState) -> KafkaUnavailableError:
    assert state.outcome is not None
    error = state.outcome.exception()
    assert isinstance(error, KafkaUnavailableError)
    return error


def _next_sleep(state: RetryCallState) -> float:
    assert state.next_action is not None
    return float(state.next_action.sleep)
