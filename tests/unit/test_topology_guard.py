"""The graph check while running: the hop held back, and changes that would add an error."""

from __future__ import annotations

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.flows.override import FlowControl
from ferry.graph.check import check_topics
from ferry.graph.guard import new_errors, refusals

IDENTITY = PolicySpec(kind="identity")


def config(*flows: FlowConfig, clusters: str = "ABC") -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in clusters},
        flows=flows,
    )


def flow(name: str, **settings: object) -> FlowConfig:
    source, target = name.split("->")
    return FlowConfig(source=source, target=target, enabled=True, policy=IDENTITY, **settings)


def test_a_double_route_holds_back_the_second_path_s_last_hop_and_nothing_else() -> None:
    cfg = config(flow("A->B"), flow("A->C"), flow("C->B"))
    topics = {"A": ["orders"], "B": ["orders"], "C": ["orders", "audit"]}
    found = refusals(cfg, topics)
    assert [e.message for e in found.errors] == [
        "A's topic orders reaches B's topic orders twice: A->B, and A->C->B (identity policy "
        "on A->B, A->C, C->B); every record would be copied there twice"
    ]
    assert dict(found.topics) == {"C->B": frozenset({"orders"})}
    held_back = {"C->B": FlowControl().remove("orders")}
    assert check_topics(cfg, topics, held_back).ok  # and with it, no error is left


def test_a_feed_into_an_identity_pair_is_refused_at_its_way_in_and_the_pair_goes_on() -> None:
    cfg = config(flow("A->B"), flow("B->A"), flow("C->A"))
    found = refusals(cfg, {"A": ["orders"], "B": ["orders"], "C": ["orders"]})
    assert {e.kind for e in found.errors} == {"unsafe-cycle"}
    assert dict(found.topics) == {"C->A": frozenset({"orders"})}
    assert found.of("A->B") == found.of("B->A") == frozenset()


def test_a_graph_without_errors_refuses_nothing() -> None:
    cfg = config(flow("A->B"), flow("B->A"))
    found = refusals(cfg, {"A": ["orders"], "B": ["orders"]})
    assert (found.errors, dict(found.topics)) == ((), {})


def test_a_topic_added_over_the_api_that_would_double_a_route_is_a_new_error() -> None:
    cfg = config(flow("A->B"), flow("A->C"), flow("C->B", topics=("payments",)))
    topics = {"A": ["orders"], "B": ["orders"], "C": ["orders", "payments"]}
    added = new_errors(cfg, topics, {}, "C->B", FlowControl().add("orders"))
    assert [(e.kind, e.cluster, e.remote_topic) for e in added] == [("double-route", "B", "orders")]
    assert "A->B, and A->C->B" in added[0].message
    assert new_errors(cfg, topics, {}, "C->B", FlowControl().add("payments")) == ()
