"""When a copy stops waiting for the target's acknowledgements (engine/copy/ack_wait.py).

The copy producers never time a copy out themselves; these waits give a batch up whole
instead: after a long silence of the target, or a short one once ferry stops. While
acknowledgements arrive, nothing is given up.
"""

from __future__ import annotations

from typing import Any

from ferry.engine.copy.ack_wait import AckWait, GaveUp, flush_until_acknowledged


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_target_that_keeps_acknowledging_is_waited_for_however_long_it_takes() -> None:
    clock = Clock()
    wait = AckWait(lambda: False, grace=5.0, timeout=120.0, clock=clock)

    for outstanding in range(100_000, 0, -1):
        clock.now += 60.0
        assert wait.gives_up(outstanding) is None


def test_a_silent_target_gives_the_batch_up_after_the_timeout() -> None:
    clock = Clock()
    wait = AckWait(lambda: False, grace=5.0, timeout=120.0, clock=clock)
    assert wait.gives_up(10) is None
    clock.now = 60.0
    assert wait.gives_up(9) is None  # an acknowledgement: the silence starts again

    clock.now = 179.9
    assert wait.gives_up(9) is None
    clock.now = 180.0
    assert wait.gives_up(9) == GaveUp(9, 120.0, stopping=False)


def test_more_copies_queued_is_no_acknowledgement() -> None:
    clock = Clock()
    wait = AckWait(lambda: False, grace=5.0, timeout=120.0, clock=clock)
    assert wait.gives_up(10) is None
    clock.now = 120.0

    assert wait.gives_up(20) == GaveUp(20, 120.0, stopping=False)


def test_a_stop_gives_up_after_the_grace_without_an_acknowledgement() -> None:
    clock, stopping = Clock(), [False]
    wait = AckWait(lambda: stopping[0], grace=5.0, timeout=120.0, clock=clock)
    assert wait.gives_up(10) is None
    clock.now = 100.0
    stopping[0] = True
    assert wait.gives_up(10) is None  # the stop is seen: its grace starts now

    clock.now = 104.9
    assert wait.gives_up(10) is None
    clock.now = 105.0
    assert wait.gives_up(10) == GaveUp(10, 105.0, stopping=True)


def test_a_stop_waits_while_acknowledgements_still_arrive() -> None:
    clock = Clock()
    wait = AckWait(lambda: True, grace=5.0, timeout=120.0, clock=clock)
    assert wait.gives_up(1000) is None
    for outstanding in range(900, 0, -100):  # a healthy target draining a full queue
        clock.now += 4.0
        assert wait.gives_up(outstanding) is None

    clock.now += 4.0
    assert wait.gives_up(100) is None  # no acknowledgement for 4 s: within the grace
    clock.now += 1.0
    assert wait.gives_up(100) == GaveUp(100, 5.0, stopping=True)


class Producer:
    """flush() reports `outstanding` copies left, fewer by `acks` each call; purge() drops them."""

    def __init__(self, outstanding: int, acks: int = 0) -> None:
        self.outstanding, self.acks, self.purged, self.flushes = outstanding, acks, 0, 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        self.outstanding = max(0, self.outstanding - self.acks)
        return self.outstanding

    def purge(self, *args: Any) -> None:
        self.purged, self.outstanding = self.outstanding, 0


def test_a_flush_returns_once_every_copy_is_acknowledged() -> None:
    producer = Producer(10, acks=3)

    assert flush_until_acknowledged(producer, lambda: False, timeout=0.5) is None
    assert producer.purged == 0


def test_a_flush_given_up_purges_and_says_how_many_were_outstanding() -> None:
    producer = Producer(10)

    gave_up = flush_until_acknowledged(producer, None, timeout=0.0)

    assert gave_up is not None and (gave_up.outstanding, gave_up.stopping) == (10, False)
    assert producer.purged == 10
