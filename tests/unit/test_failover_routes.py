"""Routes a consumer position takes to another cluster: chains, aggregates, failback."""

from __future__ import annotations

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.control.model import FlowControl
from ferry.offsets.routes import RouteHop, routes

IDENTITY = PolicySpec(kind="identity")
PREFIX = PolicySpec(kind="prefix")


def config(*flows: FlowConfig, clusters: str = "ABCD") -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in clusters},
        flows=flows,
    )


def flow(name: str, policy: PolicySpec = PREFIX, enabled: bool = True, **kw: object) -> FlowConfig:
    source, target = name.split("->")
    return FlowConfig(source=source, target=target, enabled=enabled, policy=policy, **kw)


def steps(route: tuple[RouteHop, ...]) -> list[tuple[str, str, str, str]]:
    return [(h.direction, h.flow.name, h.topic, h.next_topic) for h in route]


def test_a_chain_is_followed_forward_hop_by_hop_and_back_inverse() -> None:
    cfg = config(flow("A->B"), flow("B->C"))
    assert [steps(r) for r in routes(cfg, "A", "orders", "C")] == [
        [("forward", "A->B", "orders", "A.orders"), ("forward", "B->C", "A.orders", "B.A.orders")]
    ]
    assert [steps(r) for r in routes(cfg, "C", "B.A.orders", "A")] == [
        [("inverse", "B->C", "B.A.orders", "A.orders"), ("inverse", "A->B", "A.orders", "orders")]
    ]


def test_a_direct_flow_beats_a_chain_and_each_lands_on_its_own_remote_topic() -> None:
    cfg = config(flow("A->B"), flow("B->C"), flow("A->C"))
    found = routes(cfg, "A", "orders", "C")
    assert [r[-1].next_topic for r in found] == ["A.orders", "B.A.orders"]
    assert len(found[0]) == 1


def test_two_aggregates_are_joined_through_the_origin_without_a_flow_between_them() -> None:
    cfg = config(flow("A->C"), flow("B->C"), flow("A->D"), flow("B->D"))
    for origin in "AB":
        assert [steps(r) for r in routes(cfg, "C", f"{origin}.orders", "D")] == [
            [
                ("inverse", f"{origin}->C", f"{origin}.orders", "orders"),
                ("forward", f"{origin}->D", "orders", f"{origin}.orders"),
            ]
        ]


def test_failback_goes_back_through_a_flow_that_is_no_longer_enabled() -> None:
    cfg = config(flow("A->B", enabled=False), flow("B->A"))
    assert [steps(r) for r in routes(cfg, "B", "A.orders", "A")] == [
        [("inverse", "A->B", "A.orders", "orders")]
    ]


def test_identity_names_say_nothing_so_only_running_flows_or_the_way_home_are_followed_back() -> (
    None
):
    cfg = config(
        flow("A->B", IDENTITY, enabled=False),
        flow("C->B", IDENTITY, enabled=False),
        flow("B->D", IDENTITY),
    )
    # Back to A, the destination; not through C's disabled flow that the name cannot rule out.
    assert [steps(r) for r in routes(cfg, "B", "orders", "A")] == [
        [("inverse", "A->B", "orders", "orders")]
    ]
    assert [steps(r) for r in routes(cfg, "B", "orders", "D")] == [
        [("forward", "B->D", "orders", "orders")]
    ]


def test_a_topic_no_flow_copies_has_no_route_and_a_route_never_revisits_a_cluster() -> None:
    cfg = config(flow("A->B", topics=("payments",)), flow("B->A"))
    assert routes(cfg, "A", "orders", "B") == []
    # B's A.payments goes back to A; B->A refuses it by name (it came from A), so no loop.
    assert [steps(r) for r in routes(cfg, "B", "A.payments", "A")] == [
        [("inverse", "A->B", "A.payments", "payments")]
    ]


def test_topics_added_over_the_api_count_for_the_flow_they_were_added_to() -> None:
    cfg = config(flow("A->B", topics=("payments",)))
    added = FlowControl().add("orders")
    assert routes(cfg, "A", "orders", "B", lambda f: added if f.name == "A->B" else None)


def test_the_group_s_own_pair_is_followed_forward_even_when_its_flow_is_disabled() -> None:
    cfg = config(flow("A->B", enabled=False), flow("B->C", enabled=False), flow("A->C"))
    assert [steps(r) for r in routes(cfg, "A", "orders", "B")] == [
        [("forward", "A->B", "orders", "A.orders")]
    ]
    # A disabled flow is no hop on the way to somewhere else.
    assert [steps(r) for r in routes(cfg, "A", "orders", "C")] == [
        [("forward", "A->C", "orders", "A.orders")]
    ]
