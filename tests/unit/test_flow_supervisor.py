"""What `ferry run` does when a flow's query stops (no Spark: a clock in the test's hands, and
stand-in queries where a `FlowQuery` is looked at).

A flow whose cluster stopped answering is restarted later after each failure in a row, and
promptly again once a restarted query has copied. With the API, a flow whose copy fails for
good stays `failed` with its error (the other flows go on) until restarted; without it, or in
a `--once` run, the error stops the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.flow_query import FlowQuery, query_error
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.flow_supervisor import HEALTHY_AFTER_SECONDS, FlowSupervisor
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError, error_to_text
from ferry.flows.status import Condition

UNAVAILABLE = KafkaUnavailableError("A", "127.0.0.1:1", "Connection refused")
FATAL = ReplicationError(
    "not allowed to read", cluster="A", topic="orders", fix="grant the ferry principal Read"
)
UNREACHABLE_LINE = (
    "flow A->B: cluster A (127.0.0.1:1) is unreachable: Connection refused; "
    "retrying until it answers"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _supervisor(
    *, keep_failed: bool = False, once: bool = False
) -> tuple[FlowSupervisor, Clock, list[str]]:
    clock, notices = Clock(), []
    supervisor = FlowSupervisor(
        "A->B",
        notice=notices.append,
        keep_failed=keep_failed,
        once=once,
        once_max_wait=120,
        clock=clock,
    )
    return supervisor, clock, notices


def _fail(supervisor: FlowSupervisor, clock: Clock) -> float:
    """The flow's query fails for want of A; how long the supervisor waits to restart it."""
    supervisor.stopped(UNAVAILABLE, stopping=False)
    assert supervisor.retry_at is not None
    return supervisor.retry_at - clock.now


def _restart(supervisor: FlowSupervisor, clock: Clock) -> None:
    """The watch loop starts the query again once it is due."""
    assert supervisor.retry_at is not None
    clock.now = supervisor.retry_at
    assert supervisor.due()
    supervisor.started()


def test_restart_waits_longer_while_the_outage_lasts_and_resets_after_progress() -> None:
    supervisor, clock, notices = _supervisor()
    waits = []
    for _ in range(4):
        waits.append(_fail(supervisor, clock))
        assert not supervisor.due()
        _restart(supervisor, clock)
    assert waits == [1.0, 2.0, 4.0, 8.0]
    assert supervisor.restarts == 4
    assert supervisor.condition() == Condition(unavailable=str(UNAVAILABLE))
    supervisor.running(progressed=True)  # restarted, and it copied a batch
    assert supervisor.condition() == Condition()
    assert _fail(supervisor, clock) == 1.0  # the next blip waits a second, not a minute
    assert [n for n in notices if "unreachable" in n] == [UNREACHABLE_LINE, UNREACHABLE_LINE]
    assert notices.count("cluster A answers again") == 1
    assert supervisor.errors == {"unavailable": 5}


def test_a_restarted_query_that_has_not_copied_yet_keeps_the_backoff() -> None:
    supervisor, clock, _ = _supervisor()
    _fail(supervisor, clock)
    _restart(supervisor, clock)
    _fail(supervisor, clock)
    _restart(supervisor, clock)
    clock.now += HEALTHY_AFTER_SECONDS - 1  # running, nothing copied, not yet long enough
    supervisor.running(progressed=False)
    assert _fail(supervisor, clock) == 4.0


def test_a_restarted_query_that_ran_long_enough_without_failing_counts_as_working() -> None:
    supervisor, clock, notices = _supervisor()
    _fail(supervisor, clock)
    _restart(supervisor, clock)
    _fail(supervisor, clock)
    _restart(supervisor, clock)
    clock.now += HEALTHY_AFTER_SECONDS  # nothing to copy reports no progress to tell by
    supervisor.running(progressed=False)
    assert notices[-1] == "cluster A answers again"
    assert _fail(supervisor, clock) == 1.0


def test_without_the_api_a_fatal_error_stops_the_run() -> None:
    supervisor, _, _ = _supervisor(keep_failed=False)
    with pytest.raises(ReplicationError, match="not allowed to read"):
        supervisor.stopped(FATAL, stopping=False)


def test_with_the_api_the_flow_stays_failed_with_its_error_until_restarted() -> None:
    supervisor, clock, notices = _supervisor(keep_failed=True)
    supervisor.stopped(FATAL, stopping=False)
    condition = supervisor.condition()
    assert condition == Condition(failed=str(FATAL))
    assert "not allowed to read" in str(condition.failed)
    assert len([n for n in notices if n.startswith("flow A->B failed: ")]) == 1
    clock.now += 3600  # the watch loop turns on: nothing starts, nothing more is said
    assert not supervisor.due() and len(notices) == 1

    assert supervisor.restart() is True
    assert supervisor.condition() == Condition()
    assert supervisor.due()  # started at the watch loop's next turn
    assert notices[-1] == "flow A->B: restarted over the API"
    assert supervisor.restart() is False  # not failed any more


def test_a_kept_failure_is_still_the_runs_exit() -> None:
    supervisor, _, _ = _supervisor(keep_failed=True)
    supervisor.raise_failure()  # nothing kept: nothing raised
    supervisor.stopped(FATAL, stopping=False)
    with pytest.raises(ReplicationError, match="not allowed to read"):
        supervisor.raise_failure()


def test_a_once_run_never_keeps_a_failure() -> None:
    supervisor, _, _ = _supervisor(keep_failed=True, once=True)  # a cron job must end
    with pytest.raises(ReplicationError):
        supervisor.stopped(FATAL, stopping=False)


def test_a_stopping_run_retries_nothing() -> None:
    supervisor, _, _ = _supervisor(keep_failed=True)
    with pytest.raises(KafkaUnavailableError):
        supervisor.stopped(UNAVAILABLE, stopping=True)
    assert supervisor.condition() == Condition() and supervisor.errors == {"fatal": 1}


def test_a_once_run_gives_up_on_a_cluster_that_stays_away() -> None:
    supervisor, clock, _ = _supervisor(once=True)
    _fail(supervisor, clock)
    clock.now += 119
    _fail(supervisor, clock)
    clock.now += 1
    with pytest.raises(FerryError, match=r"gave up after 120s without an answer"):
        supervisor.stopped(UNAVAILABLE, stopping=False)


# --- a flow's query, looked at by the watch loop ---------------------------------------------


class Query:
    """A stopped stand-in for a Spark streaming query, failed with `error`."""

    isActive = False
    lastProgress: Any = None

    def __init__(self, error: FerryError) -> None:
        self._text = f"StreamingQueryException: Python worker failed: {error_to_text(error)}"

    def exception(self) -> str:
        return self._text


def _flow_query(tmp_path: Path, supervisor: FlowSupervisor) -> FlowQuery:
    flow = FlowConfig(source="A", target="B", enabled=True)
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    spec = FlowSpec.of(config, flow)
    return FlowQuery(flow, spec, FlowState(spec.state_dir), supervisor)


def test_a_failed_query_is_the_ferry_error_that_stopped_it() -> None:
    text = f"StreamingQueryException: Python worker failed: {error_to_text(FATAL)}"
    error = query_error("A->B", text)
    assert isinstance(error, ReplicationError) and str(error) == str(FATAL)
    assert isinstance(query_error("A->B", error_to_text(UNAVAILABLE)), KafkaUnavailableError)
    plain = query_error("A->B", "\n  java.lang.OutOfMemoryError: heap\n\tat x.y")
    assert str(plain) == "flow A->B failed in Spark: java.lang.OutOfMemoryError: heap"


def test_a_python_worker_failure_is_said_by_its_exception_and_the_frame_that_raised_it() -> None:
    text = (
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: "
        "Traceback (most recent call last):\n"
        '  File "/venv/pyspark/worker.py", line 1247, in main\n'
        "    process()\n"
        '  File "/venv/ferry/engine/copy/python_loop.py", line 88, in copy\n'
        "    producer.poll(0)\n"
        "cimpl.KafkaException: KafkaError{code=_FENCED,val=-144}\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x.scala:1)\n"
    )
    assert str(query_error("A->B", text)) == (
        "flow A->B failed in Spark: [PYTHON_EXCEPTION] An exception was thrown from the Python "
        "worker: cimpl.KafkaException: KafkaError{code=_FENCED,val=-144} (raised at File "
        '"/venv/ferry/engine/copy/python_loop.py", line 88, in copy)'
    )


def test_the_watch_loop_keeps_a_failed_query_failed_and_restarts_an_unavailable_one(
    tmp_path: Path,
) -> None:
    supervisor, clock, _ = _supervisor(keep_failed=True)
    f = _flow_query(tmp_path, supervisor)
    f.query = Query(UNAVAILABLE)
    f.check(None, once=False, stopping=False)
    assert f.query is None and f.progress.restarts == 1
    assert supervisor.condition() == Condition(unavailable=str(UNAVAILABLE))

    f.query = Query(FATAL)  # as if restarted, then failed for good
    f.check(None, once=False, stopping=False)
    assert f.query is None and supervisor.condition().failed == str(FATAL)
    clock.now += 3600
    f.check(None, once=False, stopping=False)  # nothing is due: no query is started
    assert f.query is None
