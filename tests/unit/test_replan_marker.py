"""A change to a running flow's topics is never lost to a plan that was reading at that moment.

The API (and the graph watch) record a change and then touch the flow's replan marker; the
running lease ends when it sees the marker and the planner plans the next one from the changed
state. A change recorded while the planner reads must leave the marker in place, or the new
lease runs its whole length (ten minutes by default) without the change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.copy import worker_clients
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.plan.batches import TP
from ferry.engine.plan.remote_topics import RemoteTopic
from ferry.engine.spark.source import Planner
from ferry.errors import FerryError
from ferry.policy import policy_for
from tests.unit.fake_kafka import TopicIdAdmin


class ChangingManager:
    """Stands in for TopicManager; `change_during_sync` records a change (as the API does:
    the marker touched) while the planner reads the flow's topics."""

    def __init__(self, state: FlowState) -> None:
        self.policy = policy_for(FlowConfig(source="A", target="B").policy, "A")
        self.state = state
        self.topics = {"first": 2}
        self.syncs = 0
        self.change_during_sync: str | None = None

    def cluster_ids(self) -> tuple[str, str]:
        return ("source-id", "target-id")

    def sync(self) -> dict[str, RemoteTopic]:
        self.syncs += 1
        seen = {t: RemoteTopic(t, f"A.{t}", n, 1048588) for t, n in self.topics.items()}
        if self.change_during_sync is not None:
            self.topics[self.change_during_sync] = 1
            self.change_during_sync = None
            self.state.replan_marker.touch()
        return seen

    def end_offsets(self, topics: dict[str, int], which: str = "latest") -> dict[TP, int]:
        end = 10 if which == "latest" else 0
        return {(t, p): end for t, n in topics.items() for p in range(n)}


class Positions:
    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def close(self) -> None:
        pass


def _planner(tmp_path: Path, *, leased: bool) -> tuple[Planner, ChangingManager]:
    flow = FlowConfig(source="A", target="B", enabled=True)
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    planner = Planner(FlowSpec.of(config, flow, leased=leased))
    planner.state.directory.mkdir(parents=True, exist_ok=True)
    manager = ChangingManager(planner.state)
    planner._manager = manager  # type: ignore[assignment]
    planner._source_admin = TopicIdAdmin()  # type: ignore[assignment]
    return planner, manager


@pytest.mark.parametrize("leased", [True, False], ids=["leases", "batches"])
def test_a_change_recorded_while_the_planner_reads_is_planned_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leased: bool
) -> None:
    monkeypatch.setattr(worker_clients, "consumer_for", lambda settings: Positions())
    planner, manager = _planner(tmp_path, leased=leased)
    limit = planner.getDefaultReadLimit()
    start: dict[str, Any] = planner.initialOffset()
    start = planner.latestOffset(start, limit)  # the first plan: "first" only

    planner.state.replan_marker.touch()  # a topic added over the API ...
    manager.change_during_sync = "second"  # ... and another while the planner reads
    start = planner.latestOffset(start, limit)
    assert planner.state.replan_marker.exists(), "the second change's marker was removed"

    planned = planner.latestOffset(start, limit)
    topics = planned["topics"] if leased else planned  # batches: {topic: {partition: end}}
    assert "second" in topics
    assert not planner.state.replan_marker.exists()


def test_no_marker_no_forced_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_clients, "consumer_for", lambda settings: Positions())
    planner, manager = _planner(tmp_path, leased=True)
    limit = planner.getDefaultReadLimit()
    start = planner.latestOffset(planner.initialOffset(), limit)
    syncs = manager.syncs
    planner.latestOffset(start, limit)
    assert manager.syncs == syncs  # within the refresh interval, nothing changed: no re-read


def test_a_plan_whose_read_fails_keeps_the_change_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_clients, "consumer_for", lambda settings: Positions())
    planner, manager = _planner(tmp_path, leased=True)
    limit = planner.getDefaultReadLimit()
    start = planner.latestOffset(planner.initialOffset(), limit)
    manager.topics["second"] = 1
    planner.state.replan_marker.touch()
    real_sync = manager.sync

    def unreachable() -> dict[str, RemoteTopic]:
        raise FerryError("cluster A: metadata request timed out")

    manager.sync = unreachable  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="cluster A: metadata request timed out"):
        planner.latestOffset(start, limit)
    assert planner.state.replan_marker.exists()
    manager.sync = real_sync  # type: ignore[method-assign]
    assert "second" in planner.latestOffset(start, limit)["topics"]
