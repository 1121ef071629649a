"""Replication policies: MM2's naming and cycle rules (cases from MM2's own connector tests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.policy import IdentityPolicy, PrefixPolicy, RenamePolicy, policy_for


class Spec:
    def __init__(self, kind: str, separator: str = ".", rename_format: str | None = None):
        self.kind, self.separator, self.rename_format = kind, separator, rename_format


def test_prefix_names_remote_topics_with_the_source_alias() -> None:
    policy = PrefixPolicy()
    assert policy.remote_topic("A", "orders") == "A.orders"
    assert policy.topic_source("A.orders") == "A"
    assert policy.upstream_topic("A.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.upstream_topic("orders") is None
    assert policy.original_topic("B.A.orders") == "orders"


def test_prefix_with_custom_separator() -> None:
    policy = PrefixPolicy("__")
    assert policy.remote_topic("A", "orders.eu") == "A__orders.eu"
    assert policy.topic_source("A__orders.eu") == "A"
    assert policy.upstream_topic("A__orders.eu") == "orders.eu"
    assert policy.checkpoints_topic("A") == "A__checkpoints__internal"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs__B__internal"


@pytest.mark.parametrize(
    ("topic", "replicate_to_target"),
    [
        ("topic1", True),
        ("source.topic1", True),  # came from elsewhere: fine to pass on
        ("target.topic1", False),  # came from target: a cycle
        ("source.target.topic1", False),  # from target two hops ago
        ("a.b.c.target.topic1", False),
        ("heartbeats", True),  # heartbeats are replicated on purpose
        ("source.heartbeats", True),
        ("target.heartbeats", False),
        ("__consumer_offsets", False),  # Kafka internal
        ("__transaction_state", False),
        (".hidden", False),
        ("mm2-offset-syncs.target.internal", False),
        ("source.checkpoints.internal", False),
        ("target.checkpoints.internal", False),
    ],
)
def test_prefix_cycle_and_internal_rules_match_mm2(topic: str, replicate_to_target: bool) -> None:
    assert PrefixPolicy().should_replicate(topic, "target") is replicate_to_target


# MM2's ReplicationPolicy.isInternalTopic: isMM2InternalTopic (DefaultReplicationPolicy: ends
# in <separator>internal) or starts with "__" or "." or ends in "-internal" or ".internal".
INTERNAL_RULES = [
    ("x.internal", "ends in '.internal'"),
    ("app.internal", "ends in '.internal'"),
    ("x-internal", "ends in '-internal'"),
    ("connect-configs-internal", "ends in '-internal'"),
    ("__x", "starts with '__'"),
    ("__consumer_offsets", "starts with '__'"),
    (".x", "starts with '.'"),
    ("mm2-configs.B.internal", "ends in '.internal'"),
    ("ferry-control.internal", "ends in '.internal'"),
]
NOT_INTERNAL = ["orders", "x.internals", "internal", "x_internal", "_x", "x.internal.v2", "x-"]
POLICIES = [
    PrefixPolicy(),
    IdentityPolicy(source_alias="A"),
    RenamePolicy("${topic}.replica"),
    RenamePolicy("${source}-${topic}-copy"),
]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: type(p).__name__)
@pytest.mark.parametrize(("topic", "rule"), INTERNAL_RULES)
def test_each_internal_topic_rule_of_mm2_holds_for_every_policy(
    policy: PrefixPolicy, topic: str, rule: str
) -> None:
    assert policy.is_internal_topic(topic)
    assert not policy.should_replicate(topic, "B")
    why = policy.internal_rule(topic)
    assert why is not None and rule in why


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: type(p).__name__)
@pytest.mark.parametrize("topic", NOT_INTERNAL)
def test_names_near_the_internal_rules_are_not_internal(policy: PrefixPolicy, topic: str) -> None:
    assert not policy.is_internal_topic(topic)
    assert policy.internal_rule(topic) is None


def test_a_custom_separator_adds_its_own_internal_suffix_and_keeps_mm2s() -> None:
    # DefaultReplicationPolicy.isMM2InternalTopic: ends in <separator>internal.
    policy = PrefixPolicy("_")
    assert policy.is_internal_topic("x_internal")
    assert policy.is_internal_topic(policy.checkpoints_topic("A"))
    assert policy.is_internal_topic(policy.offset_syncs_topic("A"))
    assert policy.is_internal_topic(policy.offset_runs_topic("A"))
    assert policy.is_internal_topic("x.internal") and policy.is_internal_topic("x-internal")
    assert policy.internal_rule("x_internal") == "its name ends in '_internal'"
    assert not PrefixPolicy().is_internal_topic("x_internal")


@pytest.mark.parametrize("separator", [".", "_", "-", "__"])
def test_ferrys_and_mm2s_own_topics_are_internal_and_heartbeats_are_not(separator: str) -> None:
    for policy in (PrefixPolicy(separator), IdentityPolicy("A", separator)):
        for own in (
            policy.checkpoints_topic("A"),
            policy.offset_syncs_topic("B"),
            policy.offset_runs_topic("A"),
            policy.consumer_timestamps_topic("A"),
        ):
            assert policy.is_internal_topic(own), own
        for heartbeats in ("heartbeats", policy.remote_topic("C", "heartbeats")):
            assert policy.is_heartbeats_topic(heartbeats)
            assert not policy.is_internal_topic(heartbeats)
            assert policy.should_replicate(heartbeats, "B")


@given(st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True), st.sampled_from([".", "_", "-"]))
def test_the_rule_in_words_names_a_reason_exactly_for_internal_topics(
    topic: str, separator: str
) -> None:
    policy = PrefixPolicy(separator)
    assert (policy.internal_rule(topic) is not None) is policy.is_internal_topic(topic)


def test_heartbeats_topics_are_recognised_across_hops() -> None:
    policy = PrefixPolicy()
    assert policy.is_heartbeats_topic("heartbeats")
    assert policy.is_heartbeats_topic("A.B.heartbeats")
    assert not policy.is_heartbeats_topic("A.orders")


def test_identity_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityPolicy(source_alias="A")
    assert policy.remote_topic("A", "orders") == "orders"
    assert policy.remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.topic_source("orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    assert policy.topic_source("B.heartbeats") == "B"


def test_identity_cycle_check_terminates_and_spots_heartbeat_cycles() -> None:
    policy = IdentityPolicy(source_alias="A")
    # Names carry no source: the record-level provenance header prevents the loop instead.
    assert policy.should_replicate("orders", "B")
    assert not policy.should_replicate("B.heartbeats", "B")
    assert policy.should_replicate("heartbeats", "B")
    # A policy that serves the flow B->A sees every plain topic as coming from B.
    assert not IdentityPolicy(source_alias="B").should_replicate("orders", "B")


def test_rename_format_round_trips_and_never_copies_copies() -> None:
    policy = RenamePolicy("${topic}.replica")
    assert policy.remote_topic("A", "orders") == "orders.replica"
    assert policy.upstream_topic("orders.replica") == "orders"
    assert policy.topic_source("orders.replica") is None
    assert policy.should_replicate("orders", "B")
    assert not policy.should_replicate("orders.replica", "B")


def test_rename_format_with_source_behaves_like_prefix_for_cycles() -> None:
    policy = RenamePolicy("${source}-${topic}-copy")
    assert policy.remote_topic("A", "orders") == "A-orders-copy"
    assert policy.topic_source("A-orders-copy") == "A"
    assert policy.upstream_topic("A-orders-copy") == "orders"
    assert policy.should_replicate("A-orders-copy", "C")
    assert not policy.should_replicate("B-orders-copy", "B")


def test_rename_format_requires_topic_placeholder() -> None:
    with pytest.raises(ValueError, match=r"lacks \$\{topic\}"):
        RenamePolicy("replica")


def test_policy_for_builds_each_kind() -> None:
    assert isinstance(policy_for(Spec("prefix", "_")), PrefixPolicy)
    assert policy_for(Spec("identity"), "A").topic_source("x") == "A"
    assert isinstance(policy_for(Spec("rename", rename_format="${topic}.r")), RenamePolicy)
    with pytest.raises(ValueError):
        policy_for(Spec("nope"))


aliases = st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,5}", fullmatch=True)
topics = st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True)


@given(st.lists(aliases, min_size=1, max_size=5), topics)
def test_prefix_chains_unwind_to_the_original(chain: list[str], topic: str) -> None:
    policy = PrefixPolicy()
    name = topic
    for alias in chain:
        name = policy.remote_topic(alias, name)
    assert policy.original_topic(name) == topic
    assert policy.topic_source(name) == chain[-1]
    # Every cluster on the chain sees the name as a cycle; the next hop elsewhere does not.
    for alias in chain:
        assert policy.is_cycle(name, alias)
    assert not policy.is_cycle(name, "Z" + "".join(chain))
