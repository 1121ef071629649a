"""Waiting for the target's acknowledgements, and when to give a batch up instead.

The copy producers never time a copy out themselves (`message.timeout.ms = 0`,
client_settings.py). When librdkafka gives up on a copy it keeps producing the partition's
later copies (the idempotent producer starts a new sequence), so those land and the given-up
stretch, copied again from the last committed position, lands after them: out of order on the
target. Here the wait ends for the whole batch instead: the producer's copies are dropped
(purged), the task fails with nothing of the batch committed, and the retry copies it again
from the last committed position, in order. librdkafka never writes a partition's later batch
without the earlier ones, so whatever of the dropped copies did land is a prefix, ahead of the
retry's copies of the rest.

A batch is given up when the target acknowledged none of its copies for `ACK_TIMEOUT_SECONDS`
(a target below `min.insync.replicas`, without leaders, or cut off: `ferry status` says which),
or, once `ferry run` is stopping, for `STOP_GRACE_SECONDS`. While acknowledgements arrive (a
healthy target draining a full queue) nothing is given up: that would only copy them twice.

`AckWait` is pure (the clock and the stop are given); `flush_until_acknowledged` drives a
producer with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACK_TIMEOUT_SECONDS",
    "STOP_GRACE_SECONDS",
    "AckWait",
    "GaveUp",
    "drop_outstanding",
    "flush_until_acknowledged",
]

ACK_TIMEOUT_SECONDS = 120.0  # librdkafka's old message timeout, now per batch
STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class GaveUp:
    """A wait given up: the copies outstanding, how long none was acknowledged, and whether
    ferry run was stopping."""

    outstanding: int
    seconds: float
    stopping: bool


class AckWait:
    """Whether a wait for `outstanding` acknowledgements should give up now.

    Call `gives_up(outstanding)` after each bounded wait (a `flush(1.0)` that returned with
    copies left, or a full producer queue)."""

    def __init__(
        self,
        stopping: Callable[[], bool] | None,
        grace: float | None = None,
        timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`grace` and `timeout`: STOP_GRACE_SECONDS and ACK_TIMEOUT_SECONDS unless given."""
        self._stopping = stopping or _never
        self._grace = STOP_GRACE_SECONDS if grace is None else grace
        self._timeout = ACK_TIMEOUT_SECONDS if timeout is None else timeout
        self._clock = clock
        self._outstanding: int | None = None
        self._acked_at = clock()  # the last acknowledgement seen (or the first look)
        self._stopped_at: float | None = None  # when the stop was first seen

    def gives_up(self, outstanding: int) -> GaveUp | None:
        now = self._clock()
        if self._outstanding is None or outstanding < self._outstanding:
            self._acked_at = now
        self._outstanding = outstanding
        silent = now - self._acked_at
        if self._stopping():
            self._stopped_at = now if self._stopped_at is None else self._stopped_at
            if now - max(self._acked_at, self._stopped_at) >= self._grace:
                return GaveUp(outstanding, silent, stopping=True)
        if silent >= self._timeout:
            return GaveUp(outstanding, silent, stopping=False)
        return None


def flush_until_acknowledged(
    producer: Any,
    stopping: Callable[[], bool] | None,
    grace: float | None = None,
    timeout: float | None = None,
) -> GaveUp | None:
    """Flush `producer` (a confluent-kafka Producer) until the target acknowledged or refused
    every copy (None), or the wait gives up: then the copies still outstanding are dropped
    (purged), and nothing of them may be committed."""
    wait = AckWait(stopping, grace, timeout)
    while (outstanding := int(producer.flush(1.0))) > 0:
        gave_up = wait.gives_up(outstanding)
        if gave_up is not None:
            drop_outstanding(producer)
            return gave_up
    return None


def drop_outstanding(producer: Any) -> None:
    """Purge the copies `producer` holds, queued or in flight, and serve their delivery
    reports (_PURGE_*): nothing of them may be committed."""
    producer.purge()
    producer.flush(0)


def _never() -> bool:
    return False
