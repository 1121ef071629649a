"""The replication graph checked as a whole: double routes, unsafe cycles, idle parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec
from ferry.graph.check import check_config, check_topics, example_topics

ALIASES = ("A", "B", "C", "D")
IDENTITY = PolicySpec(kind="identity")
PREFIX = PolicySpec(kind="prefix")


def config(*flows: FlowConfig, clusters: tuple[str, ...] = ALIASES) -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in clusters},
        flows=flows,
    )


def flow(name: str, policy: PolicySpec = IDENTITY, **settings: object) -> FlowConfig:
    source, target = name.split("->")
    return FlowConfig(source=source, target=target, enabled=True, policy=policy, **settings)


def sites(findings: tuple[object, ...]) -> set[tuple[object, ...]]:
    return {
        (f.kind, f.origin, f.topic, f.cluster, f.remote_topic)  # type: ignore[attr-defined]
        for f in findings
    }


# --- double routes -------------------------------------------------------------------------


def test_identity_a_to_b_plus_a_to_c_to_b_is_a_double_route_naming_both_paths() -> None:
    cfg = config(flow("A->B"), flow("A->C"), flow("C->B"), clusters=("A", "B", "C"))
    report = check_topics(cfg, {"A": ["orders"]})
    assert [e.message for e in report.errors] == [
        "A's topic orders reaches B's topic orders twice: A->B, and A->C->B (identity policy "
        "on A->B, A->C, C->B); every record would be copied there twice"
    ]
    assert not report.ok


def test_the_same_graph_is_refused_at_load_without_topic_names() -> None:
    cfg = config(flow("A->B"), flow("A->C"), flow("C->B"), clusters=("A", "B", "C"))
    errors = check_config(cfg).errors
    assert {(e.kind, e.origin, e.cluster) for e in errors} == {("double-route", "A", "B")}


def test_a_filter_on_the_second_hop_that_keeps_a_topic_out_removes_the_double_route() -> None:
    cfg = config(
        flow("A->B"),
        flow("A->C"),
        flow("C->B", topics=("payments",)),
        clusters=("A", "B", "C"),
    )
    report = check_topics(cfg, {"A": ["orders", "payments"]})
    assert {(e.topic, e.cluster) for e in report.errors} == {("payments", "B")}


def test_the_prefix_policy_keeps_both_copies_apart() -> None:
    cfg = config(
        flow("A->B", PREFIX), flow("A->C", PREFIX), flow("C->B", PREFIX), clusters=("A", "B", "C")
    )
    assert check_topics(cfg, {"A": ["orders"], "B": ["A.orders", "C.A.orders"]}).ok
    assert check_config(cfg).ok


def test_aggregation_into_one_cluster_is_not_a_double_route() -> None:
    cfg = config(flow("A->C"), flow("B->C"), clusters=("A", "B", "C"))
    assert check_topics(cfg, {"A": ["orders"], "B": ["orders"]}).ok


# --- cycles --------------------------------------------------------------------------------


def test_identity_active_active_is_safe_the_origin_header_stops_each_record() -> None:
    cfg = config(flow("A->B"), flow("B->A"), clusters=("A", "B"))
    assert check_topics(cfg, {"A": ["orders"], "B": ["orders"]}).ok
    assert check_config(cfg).ok


def test_an_identity_ring_of_three_is_safe_for_its_own_records() -> None:
    cfg = config(flow("A->B"), flow("B->C"), flow("C->A"), clusters=("A", "B", "C"))
    assert check_config(cfg).ok


def test_data_entering_an_identity_cycle_from_outside_would_loop_forever() -> None:
    cfg = config(flow("A->B"), flow("B->C"), flow("C->B"), clusters=("A", "B", "C"))
    report = check_topics(cfg, {"A": ["orders"]})
    assert [e.message for e in report.errors] == [
        "A's topic orders would go round a cycle: A->B brings it into B's topic orders, and "
        "B->C->B copies it back into B (as orders); its origin A is not on that cycle, so "
        "ferry's origin header does not stop it, and the topic names do not either (identity "
        "policy on B->C, C->B)"
    ]


def test_a_cluster_feeding_identity_active_active_is_refused() -> None:
    cfg = config(flow("A->B"), flow("B->A"), flow("C->A"), clusters=("A", "B", "C"))
    errors = check_config(cfg).errors
    assert [(e.kind, e.origin, e.cluster) for e in errors] == [("unsafe-cycle", "C", "A")]
    assert "C->A brings it into A's topic any-topic, and A->B->A copies it back" in (
        errors[0].message
    )


def test_a_prefix_cycle_fed_from_outside_is_safe_the_names_stop_it() -> None:
    cfg = config(
        flow("A->B", PREFIX), flow("B->C", PREFIX), flow("C->B", PREFIX), clusters=("A", "B", "C")
    )
    assert check_topics(cfg, {"A": ["orders"]}).ok
    assert check_config(cfg).ok


def test_rename_cycles_fed_from_outside_are_safe_with_or_without_the_source_in_the_name() -> None:
    for rename in ("${source}-${topic}", "${topic}.copy"):
        policy = PolicySpec(kind="rename", rename_format=rename)
        cfg = config(
            flow("A->B", policy),
            flow("B->C", policy),
            flow("C->B", policy),
            clusters=("A", "B", "C"),
        )
        assert check_topics(cfg, {"A": ["orders"], "B": ["orders"], "C": ["orders"]}).ok, rename
        assert check_config(cfg).ok, rename


def test_a_pattern_with_no_example_name_gives_no_warning() -> None:
    report = check_config(config(flow("A->B", topics=("(?!x).*",)), clusters=("A", "B")))
    assert report.ok
    assert report.warnings == ()


def test_mixed_policies_are_followed_by_name() -> None:
    # B->C prefixes, C->B keeps names: B.A.orders comes back into B and grows a prefix a lap.
    cfg = config(
        flow("A->B", PREFIX), flow("B->C", PREFIX), flow("C->B", IDENTITY), clusters=("A", "B", "C")
    )
    errors = check_topics(cfg, {"A": ["orders"]}).errors
    assert [(e.kind, e.cluster, e.remote_topic) for e in errors] == [
        ("unsafe-cycle", "B", "B.A.orders")
    ]
    assert "policies: B->C prefix, C->B identity" in errors[0].message


def test_a_topics_filter_that_keeps_the_cycle_closed_makes_it_safe() -> None:
    cfg = config(
        flow("A->B", topics=("orders",)),
        flow("B->C"),
        flow("C->B", topics=("local-.*",)),
        clusters=("A", "B", "C"),
    )
    assert check_config(cfg).ok


# --- warnings ------------------------------------------------------------------------------


def test_a_cluster_no_enabled_flow_uses_is_a_warning() -> None:
    cfg = config(flow("A->B"), clusters=("A", "B", "C"))
    report = check_config(cfg)
    assert report.ok
    assert [w.message for w in report.warnings] == [
        "cluster C is in no enabled flow: ferry neither reads nor writes it"
    ]


def test_a_flow_whose_excludes_refuse_everything_its_topics_admit_is_a_warning() -> None:
    cfg = config(flow("A->B", topics=("orders",), topics_exclude=("ord.*",)), clusters=("A", "B"))
    report = check_config(cfg)
    assert [w.kind for w in report.warnings] == ["idle-flow"]
    assert report.warnings[0].message.startswith(
        "flow A->B copies nothing: none of the names its topics ['orders'] admit"
    )


def test_a_flow_that_copies_something_is_not_idle() -> None:
    cfg = config(flow("A->B", topics=("x.*",), topics_exclude=("x",)), clusters=("A", "B"))
    assert check_config(cfg).warnings == ()


# --- example names -------------------------------------------------------------------------


def test_example_names_match_their_pattern_whole() -> None:
    assert example_topics("orders") == ["orders"]
    assert example_topics(".*") == ["any-topic"]
    assert example_topics("orders-.*") == ["orders-", "orders-any-topic"]
    assert example_topics("a|bc") == ["a", "bc"]
    assert example_topics("(?!x).*") == []


@given(st.from_regex(r"[a-z]{1,3}(\.|-|[0-9]{1,2}|\*|\+|\|){0,3}[a-z]{0,2}", fullmatch=True))
@settings(max_examples=200, deadline=None)
def test_every_example_is_a_full_match(pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error:
        return
    for name in example_topics(pattern):
        assert re.fullmatch(pattern, name)


# --- properties ----------------------------------------------------------------------------

EDGES = [(s, t) for s in ALIASES for t in ALIASES if s != t]
flows_strategy = st.lists(
    st.tuples(st.sampled_from(EDGES), st.sampled_from([IDENTITY, PREFIX])),
    unique_by=lambda f: f[0],
    max_size=7,
)


def _build(chosen: list[tuple[tuple[str, str], PolicySpec]]) -> FerryConfig:
    return config(*(flow(f"{s}->{t}", policy) for (s, t), policy in chosen))


@given(flows_strategy, st.sampled_from(EDGES), st.sampled_from([IDENTITY, PREFIX]))
@settings(max_examples=150, deadline=None)
def test_adding_a_flow_never_removes_an_error(
    chosen: list[tuple[tuple[str, str], PolicySpec]], extra: tuple[str, str], policy: PolicySpec
) -> None:
    if extra in {edge for edge, _ in chosen}:
        return
    topics = {"A": ["orders"], "C": ["orders", "pay"]}
    before = sites(check_topics(_build(chosen), topics).errors)
    after = sites(check_topics(_build([*chosen, (extra, policy)]), topics).errors)
    assert before <= after


@given(flows_strategy)
@settings(max_examples=150, deadline=None)
def test_under_the_prefix_policy_nothing_is_ever_refused(
    chosen: list[tuple[tuple[str, str], PolicySpec]],
) -> None:
    cfg = _build([(edge, PREFIX) for edge, _ in chosen])
    assert check_topics(cfg, {a: ["orders"] for a in ALIASES}).ok
    assert check_config(cfg).ok


@given(flows_strategy)
@settings(max_examples=150, deadline=None)
def test_without_cycles_there_is_never_a_cycle_error(
    chosen: list[tuple[tuple[str, str], PolicySpec]],
) -> None:
    # Flows only from an earlier alias to a later one: no cycle in the graph at all.
    acyclic = [((s, t), p) for (s, t), p in chosen if s < t]
    report = check_topics(_build(acyclic), {a: ["orders"] for a in ALIASES})
    assert all(e.kind == "double-route" for e in report.errors)
