"""The driver's lease signals over real HTTP on 127.0.0.1: a task on another machine learns
that its lease is over and reports what it copied, with the run's token only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferry.engine.flow_state import FlowState
from ferry.engine.lease_signal_server import UNHEARD_SECONDS, LeaseSignalServer
from ferry.engine.lease_signals import QUIET_SECONDS, TOKEN_HEADER, LeaseSignals

FLOW = "A->B"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LeaseSignalServer, FlowState]]:
    state = FlowState(tmp_path / "A-to-B")
    state.directory.mkdir()
    server = LeaseSignalServer({FLOW: state}, "127.0.0.1", "127.0.0.1").start()
    try:
        yield server, state
    finally:
        server.stop()


def _fresh(server: LeaseSignalServer, token: str | None = None) -> LeaseSignals:
    return LeaseSignals(server.url, server.token if token is None else token, FLOW)


@pytest.mark.parametrize("marker", ["stop_marker", "replan_marker"])
def test_a_lease_is_over_once_the_driver_leaves_a_marker(
    served: tuple[LeaseSignalServer, FlowState], marker: str
) -> None:
    server, state = served
    assert _fresh(server).over() is False
    getattr(state, marker).touch()
    assert _fresh(server).over() is True


def test_live_counters_land_in_the_drivers_state_directory(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    partitions = [{"topic": "orders", "partition": 0, "records": 7, "bytes": 70}]
    _fresh(server).write_live("0-0-abc", partitions, {"id": "1", "host": "node-2"}, 12.5)
    report = state.running_tasks()["0-0-abc"]
    assert (report.executor, report.host, report.began) == ("1", "node-2", 12.5)
    assert list(report.partitions) == partitions


def test_a_wrong_token_is_refused_and_changes_nothing(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    state.stop_marker.touch()
    intruder = _fresh(server, token="not-the-token")
    assert intruder.over() is False  # no answer: the lease goes on
    intruder.write_live("0-0-abc", [], {"id": "1"}, 0.0)
    assert state.running_tasks() == {}
    request = urllib.request.Request(f"{server.url}/flows/A-%3EB/over")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 403


def test_a_task_name_that_is_not_a_file_name_is_refused(
    served: tuple[LeaseSignalServer, FlowState], tmp_path: Path
) -> None:
    server, _state = served
    body = json.dumps({"task": "../escape", "partitions": [], "executor": {}, "began": 0})
    request = urllib.request.Request(
        f"{server.url}/flows/A-%3EB/live",
        data=body.encode(),
        method="PUT",
        headers={TOKEN_HEADER: server.token, "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400
    assert "../escape" in refused.value.read().decode()
    assert not list(tmp_path.rglob("escape*"))


def test_a_driver_that_does_not_answer_leaves_the_lease_running(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    state.stop_marker.touch()
    url = server.url
    server.stop()
    gone = LeaseSignals(url, server.token, FLOW)
    assert gone.over() is False
    gone.write_live("0-0-abc", [], {"id": "1"}, 0.0)  # no error: statistics only


def test_after_a_request_the_driver_did_not_answer_the_task_asks_nothing_for_a_while(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    now = [100.0]
    out_of_reach = LeaseSignals("http://127.0.0.1:1", server.token, FLOW, clock=lambda: now[0])
    assert out_of_reach.over() is False  # refused: quiet from now on
    out_of_reach._base = f"{server.url}/flows/A-%3EB"  # the driver answers again
    state.stop_marker.touch()
    now[0] += QUIET_SECONDS / 2
    assert out_of_reach.over() is False  # not asked
    out_of_reach.write_live("0-0-abc", [], {"id": "1"}, 0.0)
    assert state.running_tasks() == {}  # not sent
    now[0] += QUIET_SECONDS
    assert out_of_reach.over() is True
    out_of_reach.write_live("0-0-abc", [], {"id": "1"}, 0.0)
    assert set(state.running_tasks()) == {"0-0-abc"}


def test_a_lease_whose_tasks_never_ask_is_said_once_with_the_address(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    state.write_slots(2)
    state.write_lease(1, {"orders": 4})
    planned = state.lease_planned_at()
    assert planned is not None
    assert server.unheard(now=planned + UNHEARD_SECONDS - 1) == []  # tasks still starting
    [line] = server.unheard(now=planned + UNHEARD_SECONDS)
    assert f"flow {FLOW}: no leased task has reached ferry run at {server.url}" in line
    assert server.unheard(now=planned + 2 * UNHEARD_SECONDS) == []  # said once


def test_a_lease_whose_tasks_asked_or_that_has_no_slots_is_not_said(
    served: tuple[LeaseSignalServer, FlowState],
) -> None:
    server, state = served
    state.write_lease(1, {"orders": 4})
    planned = state.lease_planned_at()
    assert planned is not None
    assert server.unheard(now=planned + UNHEARD_SECONDS) == []  # no executor yet
    state.write_slots(1)
    _fresh(server).over()
    assert server.unheard(now=planned + UNHEARD_SECONDS) == []
