"""Stopping on SIGINT or SIGTERM: the first finishes what is under way, a second stops at once.

`ferry run` and `ferry monitor` both stop this way. A first signal asks the loop to finish its
current step (a batch whose copies are acknowledged and committed, a sample) and end; a second
one raises KeyboardInterrupt where the main thread is, for an operator who will not wait (an
interrupted batch is copied again next time, so nothing is lost).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["stop_on_signals"]


@contextmanager
def stop_on_signals(on_first: Callable[[], None]) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM call `on_first()` once, then interrupt."""
    asked = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal asked
        if asked:
            raise KeyboardInterrupt
        asked = True
        on_first()

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:
        pass  # not the main thread (embedded): whoever runs us stops us
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
