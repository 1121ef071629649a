"""Routes a consumer position takes to another cluster: chains, aggregates, failback."""

from __future__ import annotations

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.flows.override import FlowControl
from ferry.kafka.offset_runs import OffsetRun
from ferry.offsets.index import OffsetIndex
from ferry.offsets.routes import RouteHop, routes
from ferry.offsets.translation import routed_position

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


class Runs:
    """A flow's offset runs by source topic and partition (RunsStore's reading side)."""

    def __init__(self, runs: dict[tuple[str, int], list[OffsetRun]]) -> None:
        self._indexes = {tp: OffsetIndex(rs) for tp, rs in runs.items()}

    def has(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._indexes

    def index(self, topic: str, partition: int) -> OffsetIndex:
        return self._indexes.get((topic, partition)) or OffsetIndex()


def test_a_position_carried_over_two_hops_lands_on_the_copy_of_the_copy() -> None:
    cfg = config(flow("A->B"), flow("B->C"))
    # A's 10..59 landed at B's 0..49; B's 0..49 at C's 3..52 (C held 3 records of its own).
    stores = {
        "A->B": Runs({("orders", 0): [OffsetRun(10, 0, 50)]}),
        "B->C": Runs({("A.orders", 0): [OffsetRun(0, 3, 20), OffsetRun(20, 23, 30)]}),
    }
    (route,) = routes(cfg, "A", "orders", "C")
    at = routed_position(route, 0, 23, lambda f: stores[f.name])  # type: ignore[arg-type,return-value]
    assert at is not None
    assert (at.target_topic, at.offset, at.match, at.via) == (
        "B.A.orders",
        16,
        "exact",
        "runs A->B, runs B->C",
    )
    behind = routed_position(route, 0, 5, lambda f: stores[f.name])  # type: ignore[arg-type,return-value]
    assert behind is not None and (behind.offset, behind.match) == (3, "gap")
    (back,) = routes(cfg, "C", "B.A.orders", "A")
    home = routed_position(back, 0, 16, lambda f: stores[f.name])  # type: ignore[arg-type,return-value]
    assert home is not None and (home.target_topic, home.offset) == ("orders", 23)
    # No runs for a partition on an inverse hop: the records did not come that way.
    assert routed_position(back, 1, 5, lambda f: stores[f.name]) is None  # type: ignore[arg-type,return-value]


def test_a_lost_cluster_is_never_a_hop_so_its_runs_are_never_needed() -> None:
    # Aggregates C and D fed by A and B: from C's copy of B's topic to D goes back through B;
    # with B lost, no route is left (A never held B's topic).
    cfg = config(flow("A->C"), flow("B->C"), flow("A->D"), flow("B->D"))
    assert len(routes(cfg, "C", "B.orders", "D")) == 1
    assert routes(cfg, "C", "B.orders", "D", avoid=frozenset({"B"})) == []
    # A->B->C beside A->C: from B's copy, C is reached straight or back through A; with A
    # lost, only straight.
    chain = config(flow("A->B"), flow("B->C"), flow("A->C"))
    assert len(routes(chain, "B", "A.orders", "C")) == 2
    assert [steps(r) for r in routes(chain, "B", "A.orders", "C", avoid=frozenset({"A"}))] == [
        [("forward", "B->C", "A.orders", "B.A.orders")]
    ]
