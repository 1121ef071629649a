"""The driver's side of the lease signals (engine/lease_signals.py): each leased flow's stop
and replan markers, and its tasks' live counters, served to tasks on other machines.

A small FastAPI app on uvicorn in a thread of `ferry run` (http/asgi_thread.py):
`GET /flows/<flow>/over` and `PUT /flows/<flow>/live`, answered only with the run's token (a
random one per run, handed to the tasks in their plan). Kept out of the tasks' module: a task
imports only the client.
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import FastAPI, Header, HTTPException
from pydantic import BaseModel

from ferry.engine.flow_state import FlowState
from ferry.engine.lease_signals import TOKEN_HEADER
from ferry.http.asgi_thread import AsgiThread

__all__ = ["UNHEARD_SECONDS", "LeaseSignalServer"]

# A lease planned this long ago, with Spark slots to run on, whose tasks never asked: they
# cannot reach the driver (a firewall, a driver address the executors cannot resolve).
UNHEARD_SECONDS = 60.0
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
        app = _app(self._states, self.token, self._heard)
        self._served = AsgiThread(app, bind, 0, name="ferry-lease-signals", purpose="lease signals")
        self.url = self._served.url(advertised)

    def start(self) -> LeaseSignalServer:
        self._served.start()
        return self

    def stop(self) -> None:
        self._served.stop()

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


class LiveReport(BaseModel):
    """What a task copied so far (`PUT /flows/<flow>/live`)."""

    task: str
    partitions: list[dict[str, Any]]
    executor: dict[str, str]
    began: float


def _app(states: dict[str, FlowState], token: str, heard: dict[str, float]) -> FastAPI:
    """`GET /flows/<flow>/over` and `PUT /flows/<flow>/live`, with the run's token only."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # for ferry's tasks only

    def state_of(flow: str, given: str | None) -> FlowState:
        if not hmac.compare_digest((given or "").encode(), token.encode()):
            raise HTTPException(403, "wrong or missing token")
        if flow not in states:
            raise HTTPException(404, f"no leased flow {flow}")
        heard[flow] = time.time()
        return states[flow]

    # `:path`: a flow's name may hold a slash (sent as %2F, which the server decodes).
    @app.get("/flows/{flow:path}/over")
    async def over(
        flow: str, given: Annotated[str | None, Header(alias=TOKEN_HEADER)] = None
    ) -> dict[str, bool]:
        state = state_of(flow, given)
        return {"over": state.stop_marker.exists() or state.replan_marker.exists()}

    @app.put("/flows/{flow:path}/live")
    def live(
        flow: str,
        report: LiveReport,
        given: Annotated[str | None, Header(alias=TOKEN_HEADER)] = None,
    ) -> dict[str, str]:
        state = state_of(flow, given)
        if not TASK_NAME.fullmatch(report.task):
            raise HTTPException(400, f"not a task name: {report.task!r}")
        state.write_live(report.task, report.partitions, report.executor, report.began)
        return {}

    return app
