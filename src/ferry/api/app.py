"""The endpoints of `ferry run --api-port` (FastAPI; the OpenAPI document at /openapi.json).

Every `/api/v1` call needs the bearer token when one is configured (see auth.py); the
OpenAPI document and its /docs page describe the API and change nothing, so they are open, and
so are the web console's static files (`/`, `/console/*`: a page that holds no data; it asks
for the token and sends it with every call it makes).
Change endpoints answer the flow's override after the change; refusals are JSON
`{"detail": sentence}`: 404 for a flow that is not running, 400 for a change that cannot be
made, 503 when a cluster the change needs does not answer.
"""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, model_validator

from ferry.api.auth import token_matches
from ferry.api.events import Events
from ferry.api.history import History
from ferry.api.views import flow_summary, partition_rows
from ferry.control.controller import Controller
from ferry.errors import FerryError, KafkaUnavailableError, RejectedChangeError, UnknownFlowError
from ferry.flows.status import Condition

__all__ = ["CONSOLE_DIR", "Conditions", "Failover", "FailoverFlow", "Restart", "create_app"]

CONSOLE_DIR = Path(__file__).parent / "console"

# Per running flow, what the runner knows of it (a cluster that does not answer, a failure).
Conditions = Callable[[], dict[str, Condition]]
# Start a failed flow again by name; False if it has not failed.
Restart = Callable[[str], bool]
# (group, from, to, dry_run, from_checkpoints) -> what `ferry failover group --json` prints.
Failover = Callable[[str, str, str, bool, bool], dict[str, Any]]
# (flow, groups regex, dry_run, from_checkpoints) -> what `ferry failover flow --json` prints.
FailoverFlow = Callable[[str, str | None, bool, bool], dict[str, Any]]


class TopicRequest(BaseModel):
    topic: str = Field(min_length=1, description="A topic on the flow's source cluster")


class FailoverRequest(BaseModel):
    """One group (`group`, `from`, `to`) or every group a flow syncs (`flow`, `groups`)."""

    group: str | None = Field(None, min_length=1, description="A consumer group; or `flow`")
    from_: str | None = Field(
        None, alias="from", min_length=1, description="Cluster alias the group leaves"
    )
    to: str | None = Field(None, min_length=1, description="Cluster alias the group moves to")
    flow: str | None = Field(
        None,
        pattern=r"^.+->.+$",
        description="SOURCE->TARGET: every group the flow syncs (the answer: per group moved, "
        "unchanged or skipped with the reason, and the flow's recovery point)",
    )
    groups: str | None = Field(
        None, min_length=1, description="With `flow`: only groups whose whole name matches"
    )
    dry_run: bool = False
    from_checkpoints: bool = False

    @model_validator(mode="after")
    def one_of_group_or_flow(self) -> "FailoverRequest":
        if (self.group is None) == (self.flow is None):
            raise ValueError("give exactly one of group (with from and to) or flow")
        if self.group is not None and (self.from_ is None or self.to is None):
            raise ValueError("group needs from and to")
        if self.group is not None and self.groups is not None:
            raise ValueError("groups goes with flow, not with group")
        named = (self.from_, self.to) != (None, None)
        if self.flow is not None and named and f"{self.from_}->{self.to}" != self.flow:
            raise ValueError(f"from and to disagree with flow {self.flow}; leave them out")
        return self


def run_failover(controller: Controller) -> Failover:
    """What `ferry failover` does, against the controller's clusters; topics added or removed
    over the API count as replicated or not as they are now."""
    config = controller.config

    def failover(
        group: str, from_alias: str, to_alias: str, dry_run: bool, from_checkpoints: bool
    ) -> dict[str, Any]:
        from ferry.offsets.failover import apply_failover, plan_failover

        name = f"{from_alias}->{to_alias}"
        control = controller.states[name].control() if name in controller.states else None
        plan = plan_failover(
            config,
            group,
            from_alias,
            to_alias,
            from_checkpoints=from_checkpoints,
            control=control,
        )
        if not dry_run:
            apply_failover(config, plan)
        result: dict[str, Any] = plan.as_json()
        return result

    return failover


def run_flow_failover(controller: Controller) -> FailoverFlow:
    """What `ferry failover flow` does, against the controller's clusters."""
    config = controller.config

    def failover(
        flow: str, groups: str | None, dry_run: bool, from_checkpoints: bool
    ) -> dict[str, Any]:
        from ferry.offsets.flow_failover import (
            apply_flow_failover,
            flow_of,
            plan_flow_failover,
        )

        name = flow_of(config, flow).name
        control = controller.states[name].control() if name in controller.states else None
        report = plan_flow_failover(
            config, flow, groups=groups, from_checkpoints=from_checkpoints, control=control
        )
        if not dry_run:
            apply_flow_failover(config, report)
        result: dict[str, Any] = report.as_json()
        return result

    return failover


def create_app(
    controller: Controller,
    *,
    token: str | None,
    conditions: Conditions = dict,
    failover: Failover | None = None,
    failover_flow: FailoverFlow | None = None,
    restart: Restart | None = None,
    events: Events | None = None,
    history: History | None = None,
    alerts: Callable[[], list[dict[str, Any]]] = list,
) -> FastAPI:
    bearer = HTTPBearer(auto_error=False, description="api.token.file or FERRY_API_TOKEN")

    def authorized(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        if token is None:
            return
        if credentials is None or not token_matches(credentials.credentials, token):
            raise HTTPException(
                401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
            )

    app = FastAPI(
        title="ferry",
        summary="Change Kafka replication while it runs: topics, pause, failover.",
        version="1",
    )
    api = APIRouter(prefix="/api/v1", dependencies=[Depends(authorized)])
    run_failover_ = failover or run_failover(controller)
    run_flow_failover_ = failover_flow or run_flow_failover(controller)
    events_ = events or Events()
    history_ = history or History()

    @app.exception_handler(FerryError)
    def refused(_request: Request, exc: FerryError) -> JSONResponse:
        if isinstance(exc, UnknownFlowError):
            status = 404
        elif isinstance(exc, KafkaUnavailableError):
            status = 503
        else:
            status = 400
        return JSONResponse({"detail": str(exc)}, status_code=status)

    def summary(name: str) -> dict[str, Any]:
        flow, state = controller.flows[name], controller.states[name]
        condition = conditions().get(name, Condition())
        return flow_summary(flow, state, state.control(), condition)

    @api.get("/flows", summary="Every running flow: state, topics, lag, latency")
    def flows() -> list[dict[str, Any]]:
        return [summary(name) for name in controller.flows]

    @api.get("/flows/{source}/{target}", summary="One flow, per partition")
    def flow(source: str, target: str) -> dict[str, Any]:
        name = controller.flow(source, target).name
        return {**summary(name), "partitions": partition_rows(controller.states[name])}

    @api.post("/flows/{source}/{target}/topics", summary="Start replicating a source topic")
    def add_topic(source: str, target: str, body: TopicRequest) -> dict[str, Any]:
        return controller.add_topic(source, target, body.topic).as_json()

    @api.delete(
        "/flows/{source}/{target}/topics/{topic}",
        summary="Stop replicating a topic (its copy on the target stays)",
    )
    def remove_topic(source: str, target: str, topic: str) -> dict[str, Any]:
        return controller.remove_topic(source, target, topic).as_json()

    @api.post("/flows/{source}/{target}/pause", summary="Copy nothing; keep the position")
    def pause(source: str, target: str) -> dict[str, Any]:
        return controller.pause(source, target).as_json()

    @api.post("/flows/{source}/{target}/resume", summary="Copy again from the position")
    def resume(source: str, target: str) -> dict[str, Any]:
        return controller.resume(source, target).as_json()

    @api.post(
        "/flows/{source}/{target}/restart",
        summary="Start a failed flow again, from its position on the target",
    )
    def restart_(source: str, target: str) -> dict[str, Any]:
        name = controller.flow(source, target).name
        if restart is None or not restart(name):
            raise RejectedChangeError(f"flow {name} has not failed; only a failed flow restarts")
        return summary(name)

    @api.get(
        "/flows/{source}/{target}/history",
        summary="The last hour: lag, throughput and replication latency every few seconds",
    )
    def history_points(source: str, target: str) -> dict[str, Any]:
        name = controller.flow(source, target).name
        return {
            "interval_seconds": history_.interval_seconds,
            "points": history_.points(name, time.time()),
        }

    @api.get(
        "/alerts",
        summary="Series in sync delay now (the sliding-window rule of ferry monitor), "
        "with the offsets and numbers that raised each",
    )
    def current_alerts() -> list[dict[str, Any]]:
        return alerts()

    @api.get("/events", summary="What ferry run said lately, newest first")
    def recent_events() -> list[dict[str, Any]]:
        return events_.recent()

    @api.post(
        "/failover",
        summary="Commit a group's translated offsets on another cluster, or every group's "
        "of a flow",
    )
    def failover_(body: FailoverRequest) -> dict[str, Any]:
        if body.flow is not None:
            return run_flow_failover_(body.flow, body.groups, body.dry_run, body.from_checkpoints)
        assert body.group is not None and body.from_ is not None and body.to is not None
        return run_failover_(body.group, body.from_, body.to, body.dry_run, body.from_checkpoints)

    app.include_router(api)

    @app.get("/", include_in_schema=False)
    def console() -> FileResponse:
        return FileResponse(CONSOLE_DIR / "index.html")

    app.mount("/console", StaticFiles(directory=CONSOLE_DIR), name="console")
    return app
