"""The driver and its leased tasks on other machines: when a lease is over, what it copied.

A leased task (engine/copy/lease.py) runs on an executor, on a cluster another machine. Two
things pass between it and `ferry run`, the driver:

- when its lease is over early: `ferry run` is stopping (the flow's stop marker) or the
  assignment changed (the replan marker: a topic added, an executor lost or back);
- what it copied so far, after each slice, for the driver's live counters (`ferry status`,
  the metrics, per executor).

Both live in the flow's state directory on the driver. With a local master the tasks read and
write that directory directly. On a cluster ferry does not assume it is shared, so the driver
also serves it here over HTTP, on an address the executors already reach (Spark's
`spark.driver.host`), and the tasks ask: `LeaseSignals.over()` at most every `POLL_SECONDS`,
`LeaseSignals.write_live` after each slice. Each request carries the run's token; the server
answers nothing without it.

A driver that does not answer changes nothing in a task: its lease runs on to its end (Spark
ends the executors of a driver that is gone), and its counters are statistics, sent again
after a later slice; the task asks nothing for `QUIET_SECONDS` after such a request, so a
driver out of reach costs a slice one timeout, not one per slice.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from ferry.engine.flow_state import FlowState

__all__ = ["POLL_SECONDS", "LeaseSignalServer", "LeaseSignals"]

POLL_SECONDS = 0.5  # a lease asks whether it is over at most this often
TIMEOUT_SECONDS = 2.0  # per request; a slow answer must not hold a slice up for long
# After a request the driver did not answer, the task asks nothing for this long: a driver out
# of reach would otherwise cost each slice a timeout.
QUIET_SECONDS = 10.0
# A lease planned this long ago, with Spark slots to run on, whose tasks never asked: they
# cannot reach the driver (a firewall, a driver address the executors cannot resolve).
UNHEARD_SECONDS = 60.0
TOKEN_HEADER = "X-Ferry-Token"
TASK_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")  # a file name in the state directory


class LeaseSignalServer:
    """The driver's side: serves each flow's state directory to its leased tasks."""

    def __init__(self, states: Mapping[str, FlowState], bind: str, advertised: str) -> None:
        """`states`: by flow name. Listens on `bind` (a free port); tasks reach it at
        `advertised`, the driver's address as executors know it."""
        self.token = secrets.token_hex(16)
        self._states = dict(states)
        self._heard: dict[str, float] = {}  # by flow: when one of its tasks last asked
        self._said: set[str] = set()
        self._server = ThreadingHTTPServer(
            (bind, 0), _handler(self._states, self.token, self._heard)
        )
        self._server.daemon_threads = True
        self.url = f"http://{_host(advertised)}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ferry-lease-signals", daemon=True
        )

    def start(self) -> LeaseSignalServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def unheard(self, now: float | None = None) -> list[str]:
        """A sentence for each flow whose running lease was planned UNHEARD_SECONDS ago or
        more, with slots to run on, and none of whose tasks asked since: leases that will not
        hear that they are over, nor report what they copy. Once per flow."""
        now = time.time() if now is None else now
        lines = []
        for name, state in self._states.items():
            planned = state.lease_planned_at()
            if name in self._said or planned is None or state.slots() is None:
                continue
            if now - planned < UNHEARD_SECONDS or self._heard.get(name, 0.0) >= planned:
                continue
            self._said.add(name)
            lines.append(
                f"flow {name}: no leased task has reached ferry run at {self.url} in "
                f"{now - planned:.0f} s since its lease was planned. If Spark runs its tasks, "
                "the executors cannot reach this address (a firewall, or spark.driver.host "
                "not resolvable there): their leases end only after ferry.lease.seconds, and "
                "their counters arrive only then"
            )
        return lines


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address  # an IPv6 literal


def _handler(
    states: dict[str, FlowState], token: str, heard: dict[str, float]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state = self._state("over")
            if state is not None:
                over = state.stop_marker.exists() or state.replan_marker.exists()
                self._answer(200, {"over": over})

        def do_PUT(self) -> None:
            state = self._state("live")
            if state is None:
                return
            try:
                size = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(size))
                task = str(body["task"])
                if not TASK_NAME.fullmatch(task):
                    raise ValueError(f"not a task name: {task!r}")
                state.write_live(
                    task,
                    list(body["partitions"]),
                    {str(k): str(v) for k, v in dict(body["executor"]).items()},
                    float(body["began"]),
                )
            except (ValueError, KeyError, TypeError) as exc:
                self._answer(400, {"error": f"{type(exc).__name__}: {exc}"})
                return
            self._answer(200, {})

        def _state(self, action: str) -> FlowState | None:
            """The flow of `/flows/<name>/<action>`, once the token checked out."""
            given = self.headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode(), token.encode()):
                self._answer(403, {"error": "wrong or missing token"})
                return None
            parts = self.path.split("/")
            if len(parts) != 4 or parts[1] != "flows" or parts[3] != action:
                self._answer(404, {"error": f"no such path: {self.path}"})
                return None
            name = urllib.parse.unquote(parts[2])
            if name not in states:
                self._answer(404, {"error": f"no leased flow {name}"})
                return None
            heard[name] = time.time()
            return states[name]

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a request per task per slice: not for the driver's log

    return Handler


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
