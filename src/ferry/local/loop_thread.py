"""An asyncio loop in a daemon thread of its own, driven from the caller's thread.

The link proxies (`ferry.local.link_proxy.LinkProxy`, the benchmark's `bench.wan.link.WanLink`)
keep their sockets in such a loop, so that a caller blocked on Kafka or Spark never holds up
the bytes they carry or the timers that delay them. A subclass fills in `_open` (run in the loop
by `start()`, which returns once it has) and `_close` (run by `stop()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """A loop in a daemon thread: `start()`/`stop()` or a context manager; `_call` runs a
    coroutine in it from any other thread and waits for its result."""

    def __init__(self, name: str) -> None:
        self._name = name  # the thread's name, which a stack dump shows
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Start the loop's thread and run `_open` in it. If `_open` fails, the thread is
        stopped before the error is raised: a daemon loop left running would hold its sockets
        until the process exits."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
        self._thread.start()
        try:
            self._call(self._open())
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Run `_close` in the loop, then end the loop and its thread. Idempotent."""
        if self._loop is None or self._thread is None:
            return
        # A close that fails or hangs must not keep the thread alive: stop goes on regardless.
        with contextlib.suppress(Exception):
            self._call(self._close(), timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()  # closing a loop that still runs raises
        self._loop = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run `coroutine` in the loop and wait up to `timeout` seconds for its result."""
        assert self._loop is not None, "the loop is not started"
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    # --- in the loop, for a subclass to fill in -------------------------------------------------

    async def _open(self) -> None:
        """What `start()` waits for, such as listening on its ports."""

    async def _close(self) -> None:
        """What `stop()` does before the loop ends, such as closing every connection."""
