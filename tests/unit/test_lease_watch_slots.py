"""The lease watch re-plans leases when Spark's task slots change (an executor lost or back)."""

from __future__ import annotations

from pathlib import Path

from ferry.config import load_config
from ferry.engine.flow_state import FlowState
from ferry.engine.lease_watch import AssignmentWatch

CONFIG = """
clusters:
  A: {bootstrap.servers: '127.0.0.1:1'}
  B: {bootstrap.servers: '127.0.0.1:2'}
A->B.enabled: true
topics: orders
"""


def _watch(tmp_path: Path, slots: list[int]) -> tuple[AssignmentWatch, FlowState, list[str]]:
    path = tmp_path / "ferry.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    state = FlowState(tmp_path / "A-B")
    notices: list[str] = []
    watch = AssignmentWatch(
        config,
        [(config.enabled_flows[0], state)],
        lambda: False,
        slots=lambda: slots.pop(0),
        notice=notices.append,
    )
    return watch, state, notices


def test_the_first_count_is_written_without_ending_the_lease(tmp_path: Path) -> None:
    watch, state, notices = _watch(tmp_path, [2])
    assert watch.check_slots() is False
    assert state.slots() == 2
    assert not state.replan_marker.exists()
    assert notices == []


def test_no_executor_yet_is_no_count_and_the_first_executors_replan(tmp_path: Path) -> None:
    watch, state, _notices = _watch(tmp_path, [0, 2])
    assert watch.check_slots() is False  # still registering: the planner keeps its own count
    assert state.slots() is None
    assert watch.check_slots() is True
    assert (state.slots(), state.replan_marker.exists()) == (2, True)


def test_a_lost_executor_ends_the_leases_and_a_returning_one_too(tmp_path: Path) -> None:
    watch, state, notices = _watch(tmp_path, [2, 1, 1, 2])
    watch.check_slots()
    assert watch.check_slots() is True  # a worker lost
    assert (state.slots(), state.replan_marker.exists()) == (1, True)
    state.replan_marker.unlink()  # the planner planned the next lease
    assert watch.check_slots() is False  # unchanged: the lease runs on
    assert not state.replan_marker.exists()
    assert watch.check_slots() is True  # the worker is back
    assert (state.slots(), state.replan_marker.exists()) == (2, True)
    assert [n.split(" (")[0] for n in notices] == [
        "Spark's task slots per leased flow changed from 2 to 1",
        "Spark's task slots per leased flow changed from 1 to 2",
    ]
