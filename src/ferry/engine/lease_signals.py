"""The driver and its leased tasks on other machines: when a lease is over, what it copied.

A leased task (engine/copy/lease.py) runs on an executor, on a cluster another machine. Two
things pass between it and `ferry run`, the driver:

- when its lease is over early: `ferry run` is stopping (the flow's stop marker) or the
  assignment changed (the replan marker: a topic added, an executor lost or back);
- what it copied so far, after each slice, for the driver's live counters (`ferry status`,
  the metrics, per executor).

Both live in the flow's state directory on the driver. With a local master the tasks read and
write that directory directly. On a cluster ferry does not assume it is shared, so the driver
also serves it over HTTP (engine/lease_signal_server.py), on an address the executors already
reach (Spark's `spark.driver.host`), and the tasks ask with this module's `LeaseSignals`:
`over()` at most every `POLL_SECONDS`, `write_live` after each slice. Each request carries the
run's token; the server answers nothing without it.

A driver that does not answer changes nothing in a task: its lease runs on to its end (Spark
ends the executors of a driver that is gone), and its counters are statistics, sent again
after a later slice; the task asks nothing for `QUIET_SECONDS` after such a request, so a
driver out of reach costs a slice one timeout, not one per slice.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["POLL_SECONDS", "TOKEN_HEADER", "LeaseSignals"]

POLL_SECONDS = 0.5  # a lease asks whether it is over at most this often
TIMEOUT_SECONDS = 2.0  # per request; a slow answer must not hold a slice up for long
# After a request the driver did not answer, the task asks nothing for this long: a driver out
# of reach would otherwise cost each slice a timeout.
QUIET_SECONDS = 10.0
TOKEN_HEADER = "X-Ferry-Token"


_shared: dict[int, httpx.Client] = {}  # by process id: a forked worker never uses its parent's
_shared_lock = threading.Lock()


def _client() -> httpx.Client:
    """One client for every lease of this process: a client costs a TLS context to build."""
    with _shared_lock:
        pid = os.getpid()
        if pid not in _shared:
            _shared.clear()
            _shared[pid] = httpx.Client(timeout=TIMEOUT_SECONDS)
        return _shared[pid]


class LeaseSignals:
    """A leased task's side: asks the driver at `url` about flow `flow`."""

    def __init__(
        self, url: str, token: str, flow: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._base = f"{url}/flows/{urllib.parse.quote(flow, safe='')}"
        self._token = token
        self._clock = clock
        self._asked = float("-inf")
        self._quiet_until = float("-inf")
        self._over = False

    def over(self) -> bool:
        """Whether the driver says the lease is over (asked at most every POLL_SECONDS; a
        driver that does not answer: not over)."""
        now = self._clock()
        if self._over or now - self._asked < POLL_SECONDS:
            return self._over
        self._asked = now
        answer = self._request("GET", "over")
        self._over = bool(answer.get("over", False)) if answer is not None else False
        return self._over

    def write_live(
        self, task: str, partitions: list[dict[str, Any]], executor: dict[str, str], began: float
    ) -> None:
        """What the task committed so far, for the driver's counters (lost if it does not
        answer: the next slice sends it again)."""
        body = {"task": task, "partitions": partitions, "executor": executor, "began": began}
        self._request("PUT", "live", body)

    def _request(
        self, method: str, action: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        if self._clock() < self._quiet_until:
            return None
        data = json.dumps(body).encode() if body is not None else None
        headers = {TOKEN_HEADER: self._token, "Content-Type": "application/json"}
        try:
            response = _client().request(
                method, f"{self._base}/{action}", content=data, headers=headers
            )
            response.raise_for_status()
            answer: dict[str, Any] = json.loads(response.content)
            return answer
        except (httpx.HTTPError, OSError, ValueError):  # unreachable, refused, timed out, 4xx/5xx
            self._quiet_until = self._clock() + QUIET_SECONDS
            return None
