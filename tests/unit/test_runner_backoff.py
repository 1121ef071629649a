"""The runner restarts a flow whose cluster stopped answering: later after each failure in a
row, and promptly again once a restarted query has copied (no Spark: queries are stand-ins)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner, _Flow
from ferry.errors import KafkaUnavailableError, error_to_text

DOWN = error_to_text(KafkaUnavailableError("A", "127.0.0.1:1", "Connection refused"))


class Query:
    def __init__(self, *, failing: bool, progressed: bool = False) -> None:
        self.isActive = not failing
        self.lastProgress: Any = {"batchId": 1} if progressed else None
        self._failing = failing

    def exception(self) -> str | None:
        return f"StreamingQueryException: {DOWN}" if self._failing else None


def _runner(tmp_path: Path, notices: list[str]) -> tuple[Runner, _Flow]:
    flow = FlowConfig(source="A", target="B", enabled=True)
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    spec = FlowSpec.of(config, flow)
    return Runner(config, on_notice=notices.append), _Flow(flow, spec, FlowState(spec.state_dir))


def _fail(runner: Runner, f: _Flow) -> float:
    """The flow's query fails for want of A; how long the runner waits before restarting it."""
    f.query = Query(failing=True)
    runner._check(None, f)
    assert f.query is None and f.retry_at is not None
    return f.retry_at - time.monotonic()


def test_restart_waits_longer_while_the_outage_lasts_and_resets_after_progress(
    tmp_path: Path,
) -> None:
    notices: list[str] = []
    runner, f = _runner(tmp_path, notices)
    waits = [_fail(runner, f) for _ in range(4)]
    assert waits[0] <= 1.0 < waits[1] <= 2.0 < waits[2] <= 4.0 < waits[3]
    f.query = Query(failing=False, progressed=True)  # restarted, and it copied a batch
    runner._check(None, f)
    assert _fail(runner, f) <= 1.0  # the next blip waits a second, not a minute
    assert [n for n in notices if "unreachable" in n] == [
        "flow A->B: cluster A (127.0.0.1:1) is unreachable: Connection refused; "
        "retrying until it answers",
        "flow A->B: cluster A (127.0.0.1:1) is unreachable: Connection refused; "
        "retrying until it answers",
    ]
    assert notices.count("cluster A answers again") == 1


def test_a_restarted_query_that_has_not_copied_yet_keeps_the_backoff(tmp_path: Path) -> None:
    runner, f = _runner(tmp_path, [])
    _fail(runner, f)
    _fail(runner, f)
    f.query = Query(failing=False)  # running, nothing copied, not yet long enough to count
    f.healthy_at = time.monotonic() + 60
    runner._check(None, f)
    assert _fail(runner, f) > 2.0
