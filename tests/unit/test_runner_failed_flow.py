"""With the API, a flow whose copy fails for good stays `failed` with its error (the other
flows go on) until restarted; without it, the error stops `ferry run` as before (no Spark:
queries are stand-ins)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner, _Flow
from ferry.errors import ReplicationError, error_to_text
from ferry.flows.status import Condition

FATAL = ReplicationError(
    "not allowed to read", cluster="A", topic="orders", fix="grant the ferry principal Read"
)


class FailedQuery:
    isActive = False

    def exception(self) -> str:
        return f"StreamingQueryException: Python worker failed: {error_to_text(FATAL)}"


def _runner(
    tmp_path: Path, *, keep_failed: bool, once: bool = False
) -> tuple[Runner, _Flow, list[str]]:
    flow = FlowConfig(source="A", target="B", enabled=True)
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    notices: list[str] = []
    runner = Runner(config, on_notice=notices.append, keep_failed=keep_failed, once=once)
    spec = FlowSpec.of(config, flow)
    f = _Flow(flow, spec, FlowState(spec.state_dir))
    runner._flows.append(f)
    return runner, f, notices


def test_without_the_api_a_fatal_error_stops_the_run(tmp_path: Path) -> None:
    runner, f, _ = _runner(tmp_path, keep_failed=False)
    f.query = FailedQuery()
    with pytest.raises(ReplicationError, match="not allowed to read"):
        runner._check(None, f)


def test_with_the_api_the_flow_stays_failed_with_its_error_until_restarted(
    tmp_path: Path,
) -> None:
    runner, f, notices = _runner(tmp_path, keep_failed=True)
    f.query = FailedQuery()
    runner._check(None, f)
    condition = runner.flow_conditions()["A->B"]
    assert condition == Condition(failed=str(FATAL))
    assert "not allowed to read" in str(condition.failed)
    assert len([n for n in notices if n.startswith("flow A->B failed: ")]) == 1
    runner._check(None, f)  # the watch loop turns on: nothing starts, nothing more is said
    assert f.query is None and len(notices) == 1

    assert runner.restart("A->B") is True
    assert runner.flow_conditions()["A->B"] == Condition()
    assert f.retry_at is not None and f.retry_at <= time.monotonic()  # started at next turn
    assert notices[-1] == "flow A->B: restarted over the API"
    assert runner.restart("A->B") is False  # not failed any more


def test_a_kept_failure_is_still_the_runs_exit(tmp_path: Path) -> None:
    runner, f, _ = _runner(tmp_path, keep_failed=True)
    f.query = FailedQuery()
    runner._check(None, f)
    runner._run = lambda: [f.progress]  # type: ignore[method-assign]  # stopped by a signal
    with pytest.raises(ReplicationError, match="not allowed to read"):
        runner.run()


def test_a_once_run_never_keeps_a_failure(tmp_path: Path) -> None:
    runner, f, _ = _runner(tmp_path, keep_failed=True, once=True)  # a cron job must end
    f.query = FailedQuery()
    with pytest.raises(ReplicationError):
        runner._check(None, f)
