"""Topic selection: MM2's full-match include/exclude regexes plus the policy's naming rules."""

from __future__ import annotations

import re

import pytest

from ferry.config.model import FlowConfig
from ferry.graph.selection import TopicSelector
from ferry.policy import IdentityPolicy, PrefixPolicy

INTERNAL = [
    "ferry-offset-runs.A.internal",
    "ferry-offset-runs.B.internal",
    "A.checkpoints.internal",
    "B.checkpoints.internal",
    "mm2-offset-syncs.A.internal",
    "mm2-offset-syncs.B.internal",
    "mm2-configs.B.internal",
    "__consumer_offsets",
    "__transaction_state",
]


def selector(**settings: object) -> TopicSelector:
    """Flow B->A under the prefix policy, with MM2's defaults unless overridden."""
    return TopicSelector(FlowConfig(source="B", target="A", **settings), PrefixPolicy())


def test_regexes_match_the_whole_name() -> None:
    select = selector(topics=("orders", "pay.*"))
    assert select.accepts("orders")
    assert not select.accepts("orders2")
    assert not select.accepts("my-orders")
    assert select.accepts("payments")
    assert not select.accepts("repayments")


def test_excludes_match_the_whole_name() -> None:
    select = selector(topics_exclude=("orders",))
    assert not select.accepts("orders")
    assert select.accepts("orders2")
    assert select.accepts("old-orders")


@pytest.mark.parametrize("topic", ["mm2-status.B.internal", "orders.replica", "__schemas"])
def test_mm2_default_excludes(topic: str) -> None:
    assert not selector().accepts(topic)


def test_default_excludes_are_only_defaults() -> None:
    # `.replica` is not an internal name: with the exclude list emptied it is selected
    assert selector(topics_exclude=()).accepts("orders.replica")


@pytest.mark.parametrize("topic", INTERNAL)
@pytest.mark.parametrize(
    "settings",
    [{}, {"topics_exclude": ()}, {"topics": tuple(INTERNAL), "topics_exclude": ()}],
    ids=["defaults", "no-excludes", "listed-explicitly"],
)
def test_internal_topics_are_never_selected(topic: str, settings: dict[str, object]) -> None:
    assert not selector(**settings).accepts(topic)


@pytest.mark.parametrize(
    "topic",
    ["x.internal", "x-internal", "__x", ".x", "connect-offsets-internal"],
    ids=["dot-internal", "dash-internal", "double-underscore", "dot-first", "connect"],
)
@pytest.mark.parametrize(
    "policy", [PrefixPolicy(), IdentityPolicy("B")], ids=["prefix", "identity"]
)
def test_everything_means_everything_but_internal_topics(topic: str, policy: PrefixPolicy) -> None:
    # MM2: `topics = .*` with no excludes still never copies an internal topic, nor does
    # naming it exactly (ferry validate says so: see test_config_internal_topics).
    flow = FlowConfig(source="B", target="A", topics=(".*",), topics_exclude=())
    assert TopicSelector(flow, policy).select([topic, "orders"]) == ["orders"]
    named = FlowConfig(source="B", target="A", topics=(re.escape(topic),))
    assert not TopicSelector(named, policy).accepts(topic)


def test_heartbeats_still_travel_with_every_topic_selected() -> None:
    select = selector(topics=(".*",), topics_exclude=())
    assert select.select(["heartbeats", "C.heartbeats", "A.heartbeats", "x.internal", "o"]) == [
        "C.heartbeats",
        "heartbeats",
        "o",
    ]


def test_prefix_policy_never_copies_a_topic_back_to_its_source() -> None:
    select = selector(topics_exclude=())
    assert not select.accepts("A.orders")  # came from A: copying it back to A is a cycle
    assert not select.accepts("C.A.orders")  # from A two hops ago
    assert select.accepts("C.orders")
    assert select.accepts("orders")


def test_heartbeats_are_selected_except_those_from_the_target() -> None:
    select = selector()
    assert select.accepts("heartbeats")
    assert select.accepts("C.heartbeats")
    assert not select.accepts("A.heartbeats")


def test_heartbeats_travel_whatever_the_topic_lists_say() -> None:
    # MM2: (filter matches or isHeartbeatsTopic) and not internal and not cycle
    select = selector(topics=("orders",), topics_exclude=(".*heartbeats",))
    assert select.accepts("heartbeats")
    assert select.accepts("C.heartbeats")
    assert not select.accepts("A.heartbeats")  # still a cycle back to the target
    assert not select.accepts("payments")  # the lists still rule every other topic
    assert not select.accepts("heartbeats2")


def test_identity_policy_cannot_see_sources_in_names_but_still_skips_internals() -> None:
    flow = FlowConfig(source="B", target="A")
    select = TopicSelector(flow, IdentityPolicy("B"))
    assert select.accepts("orders")
    assert select.accepts("A.orders")  # just a name: loops are stopped per record instead
    assert not select.accepts("orders2.replica")
    for topic in INTERNAL:
        assert not select.accepts(topic)


def test_select_filters_and_sorts() -> None:
    topics = ["orders2", "C.orders", "A.orders", "orders", "heartbeats", *INTERNAL]
    assert selector(topics=("orders", "C\\..*", "heartbeats")).select(topics) == [
        "C.orders",
        "heartbeats",
        "orders",
    ]
