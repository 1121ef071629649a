"""The running check of the graph: refused topics written for the planner, said once."""

from __future__ import annotations

from pathlib import Path

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.engine.flow_state import FlowState
from ferry.engine.graph_watch import GraphWatch
from ferry.flows.override import FlowControl

IDENTITY = PolicySpec(kind="identity")


def _config() -> FerryConfig:
    flows = tuple(
        FlowConfig(source=n[0], target=n[-1], enabled=True, policy=IDENTITY, topics=topics)
        for n, topics in (("A->B", (".*",)), ("A->C", (".*",)), ("C->B", ("orders-eu.*",)))
    )
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in "ABC"}
    return FerryConfig(clusters=clusters, flows=flows)


def test_a_topic_that_newly_completes_a_double_route_is_held_back_on_one_hop_only(
    tmp_path: Path,
) -> None:
    topics = {"A": {"orders"}, "B": {"orders"}, "C": {"orders"}}
    states = {name: FlowState(tmp_path / name) for name in ("A->B", "A->C", "C->B")}
    notices: list[str] = []
    watch = GraphWatch(_config(), states, notices.append, topics=lambda a: topics[a])

    assert watch.check() == {}
    assert notices == [] and not states["C->B"].replan_marker.exists()

    # A topic C->B's narrow pattern admits appears on A (and so, copied, on C).
    for alias in "ABC":
        topics[alias].add("orders-eu")
    assert watch.check() == {"C->B": frozenset({"orders-eu"})}
    assert states["C->B"].refused() == {"orders-eu"}
    assert states["C->B"].selection_control() == FlowControl().remove("orders-eu")
    assert states["C->B"].replan_marker.exists()
    assert states["A->B"].refused() == states["A->C"].refused() == frozenset()
    assert not states["A->B"].replan_marker.exists(), "a flow that is fine was disturbed"
    assert notices == [
        "refused: A's topic orders-eu reaches B's topic orders-eu twice: A->B, and A->C->B "
        "(identity policy on A->B, A->C, C->B); every record would be copied there twice; "
        "held back: C->B does not copy orders-eu; the rest copies on"
    ]
    watch.check()
    assert len(notices) == 1, "an error is said once"


def test_a_cluster_that_does_not_answer_is_left_out_and_the_rest_is_checked(
    tmp_path: Path,
) -> None:
    topics = {"A": {"orders-eu"}, "B": set(), "C": None}
    states = {name: FlowState(tmp_path / name) for name in ("A->B", "A->C", "C->B")}
    watch = GraphWatch(_config(), states, lambda _m: None, topics=lambda a: topics[a])
    assert watch.check() == {"C->B": frozenset({"orders-eu"})}  # followed from A, through C
