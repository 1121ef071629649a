"""The lease watch ends a running lease when one of its topics was deleted and created again
under its name (its id changed), which the lease's consumers cannot see."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.config import load_config
from ferry.engine.flow_state import FlowState
from ferry.engine.lease_watch import AssignmentWatch

CONFIG = """
clusters:
  A: {bootstrap.servers: '127.0.0.1:1'}
  B: {bootstrap.servers: '127.0.0.1:2'}
A->B.enabled: true
topics: orders|payments
"""
OLD, NEW = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"


@dataclass
class Description:
    topic_id: str


class Source:
    """Describes each topic with the id in `ids`; a topic not there is not described."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Future[Any]]:
        answer: dict[str, Future[Any]] = {}
        for name in topics.topic_names:
            future: Future[Any] = Future()
            if name in self.ids:
                future.set_result(Description(self.ids[name]))
            else:
                future.set_exception(RuntimeError(f"{name}: unknown topic"))
            answer[name] = future
        return answer

    def list_topics(self, timeout: float) -> None:
        pass  # a topic not described is asked once more after a metadata read


class Manager:
    def __init__(self, selected: dict[str, int], ids: dict[str, str]) -> None:
        self._selected, self.source_admin = selected, Source(ids)

    def selected(self) -> dict[str, int]:
        return self._selected


@dataclass
class Watched:
    watch: AssignmentWatch
    state: FlowState
    manager: Manager
    notices: list[str]

    def check(self) -> bool:
        flow = self.watch._flows[0][0]
        return self.watch.check(flow, self.state)


def _watched(tmp_path: Path, now: dict[str, str], planned: dict[str, str]) -> Watched:
    """A watch over a running lease of orders and payments, planned with the ids `planned`;
    the source describes them with the ids `now`."""
    path = tmp_path / "ferry.yaml"
    path.write_text(CONFIG)
    config = load_config(path)
    flow = config.enabled_flows[0]
    state = FlowState(tmp_path / "A-B")
    topics = {"orders": 3, "payments": 1}
    state.write_lease(1, topics, planned)
    notices: list[str] = []
    watch = AssignmentWatch(config, [(flow, state)], lambda: False, notice=notices.append)
    manager = Manager(topics, now)
    watch._managers[flow.name] = manager  # type: ignore[assignment]
    return Watched(watch, state, manager, notices)


def _watch(
    tmp_path: Path, now: dict[str, str], planned: dict[str, str]
) -> tuple[bool, FlowState, list[str]]:
    watched = _watched(tmp_path, now, planned)
    return watched.check(), watched.state, watched.notices


def test_a_topic_with_another_id_than_the_lease_was_planned_with_ends_the_lease(
    tmp_path: Path,
) -> None:
    replanned, state, notices = _watch(
        tmp_path, {"orders": NEW, "payments": OLD}, {"orders": OLD, "payments": OLD}
    )
    assert replanned and state.replan_marker.exists()
    assert notices == [
        f"flow A->B: topic orders on A was deleted and re-created under the running lease "
        f"(its topic id was {OLD}, is {NEW}): the lease ends and the next copies the new topic "
        "from its start"
    ]


def test_the_same_ids_or_ids_not_known_leave_the_lease_running(tmp_path: Path) -> None:
    for case, (now, planned) in enumerate(
        [
            ({"orders": OLD, "payments": OLD}, {"orders": OLD, "payments": OLD}),
            ({"payments": OLD}, {"orders": OLD, "payments": OLD}),  # orders not described
            ({"orders": NEW, "payments": OLD}, {"payments": OLD}),  # planned without its id
        ]
    ):
        (tmp_path / str(case)).mkdir()
        replanned, state, notices = _watch(tmp_path / str(case), now, planned)
        assert (replanned, state.replan_marker.exists(), notices) == (False, False, []), case


def test_a_lease_planned_without_an_id_is_watched_from_the_id_first_seen(tmp_path: Path) -> None:
    # The source did not describe the topics when the lease was planned.
    watched = _watched(tmp_path, {"orders": OLD, "payments": OLD}, {})
    assert watched.check() is False  # the ids first seen under this lease
    watched.manager.source_admin.ids["orders"] = NEW  # deleted and created again under it
    assert watched.check() is True
    assert watched.state.replan_marker.exists() and len(watched.notices) == 1
