"""Protected remote topics: which DENYs protect them, which a lift takes back, and how the
flow's control record keeps a lift."""

from __future__ import annotations

import pytest

from ferry.config.model import FlowConfig, PolicySpec
from ferry.flows.override import FlowControl
from ferry.flows.protection import lifted_denies, protection, remote_topics_of
from ferry.flows.switchover import AclEntry
from ferry.graph.selection import TopicSelector
from ferry.policy import policy_for

FERRY = "User:ferry"


def allow(name: str, principal: str, op: str = "WRITE", pattern: str = "LITERAL") -> AclEntry:
    return AclEntry(pattern, name, principal, op, "ALLOW")


def deny(name: str, principal: str) -> AclEntry:
    return AclEntry("LITERAL", name, principal, "WRITE", "DENY")


def test_every_writer_but_ferry_is_denied_by_literal_prefixed_and_any_topic_acls() -> None:
    acls = [
        allow("A.orders", "User:app"),
        allow("A.", "User:etl", "ALL", "PREFIXED"),
        allow("*", "User:ops"),
        allow("A.orders", FERRY),
        allow("A.orders", "User:reader", "READ"),
        allow("B.orders", "User:other"),
    ]
    got = protection(acls, ["A.orders"], FERRY, "B")
    assert got.denies == (
        ("A.orders", "User:app"),
        ("A.orders", "User:etl"),
        ("A.orders", "User:ops"),
    )
    assert got.unprotectable == ()


def test_a_writer_already_denied_needs_no_second_deny() -> None:
    acls = [allow("A.orders", "User:app"), deny("A.orders", "User:app")]
    assert protection(acls, ["A.orders"], FERRY, "B").denies == ()


def test_a_topic_everyone_may_write_is_named_and_the_others_still_protected() -> None:
    acls = [allow("A.open", "User:*"), allow("A.orders", "User:app")]
    got = protection(acls, ["A.open", "A.orders"], FERRY, "B")
    assert got.denies == (("A.orders", "User:app"),)
    assert len(got.unprotectable) == 1
    assert "A.open on B" in got.unprotectable[0]
    assert "User:*" in got.unprotectable[0]


def test_remote_topics_are_the_flows_copies_only() -> None:
    flow = FlowConfig(source="A", target="B", topics=("orders.*", "heartbeats"))
    policy = policy_for(flow.policy, "A")
    topics = [
        "A.orders",
        "A.orders-eu",
        "A.payments",  # the flow does not take `payments`
        "C.orders",  # another source's copy
        "orders",  # B's own topic
        "A.checkpoints.internal",
        "ferry-offset-runs.A.internal",
    ]
    got = remote_topics_of(
        topics,
        "A",
        policy.topic_source,
        policy.upstream_topic,
        TopicSelector(flow, policy).accepts,
        policy.is_internal_topic,
    )
    assert got == ["A.orders", "A.orders-eu"]


def test_a_lift_takes_back_the_protections_denies_and_nothing_else() -> None:
    acls = [
        allow("A.orders", "User:app"),
        deny("A.orders", "User:app"),  # protection's
        deny("A.orders", "User:banned"),  # an operator's: User:banned holds no ALLOW WRITE
        allow("A.", "User:etl", "WRITE", "PREFIXED"),
        deny("A.payments", "User:etl"),  # protection's, on a topic not lifted
        deny("A.orders", FERRY),  # never ferry's own (whoever made it)
    ]
    assert lifted_denies(acls, {"A.orders"}, FERRY) == [("A.orders", "User:app")]
    assert lifted_denies(acls, {"A.orders", "A.payments"}, FERRY) == [
        ("A.orders", "User:app"),
        ("A.payments", "User:etl"),
    ]


def test_the_control_record_keeps_a_lift_until_a_switchover_back() -> None:
    control = FlowControl().lift(frozenset({"A.orders"}))
    assert not control.protected("A.orders")
    assert control.protected("A.payments")
    assert not control.empty
    every = control.lift()
    assert not every.protected("A.payments")
    assert every.lift(frozenset({"A.x"})) == every  # all stays all
    assert FlowControl.from_bytes(every.to_bytes()) == every
    assert FlowControl.from_bytes(control.to_bytes()) == control
    assert every.protect().protected("A.orders")
    assert every.protect().empty


def test_records_written_before_lifts_existed_stay_byte_equal() -> None:
    old = b'{"added": [], "paused": true, "removed": []}'
    assert FlowControl.from_bytes(old).to_bytes() == old


@pytest.mark.parametrize("lifted", ['"A.orders"', "[1]", "{}"])
def test_a_lift_that_is_not_a_list_of_names_is_refused(lifted: str) -> None:
    with pytest.raises(ValueError, match="not a flow control record"):
        FlowControl.from_bytes(f'{{"paused": false, "lifted": {lifted}}}'.encode())


def test_the_identity_policy_and_an_unnamed_principal_leave_topics_unprotected() -> None:
    from ferry.config.model import ClusterConfig, FerryConfig
    from ferry.sync.topic_protection import RemoteTopicProtection

    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    identity = FlowConfig(source="A", target="B", policy=PolicySpec(kind="identity"))
    config = FerryConfig(clusters=clusters, flows=(identity,))
    task = RemoteTopicProtection(config, identity)
    first = task.protect()
    assert "identity policy" in first.skipped[0]
    assert task.protect().skipped == ()  # said once
    plain = FlowConfig(source="A", target="B")
    for authorizer, why in ((False, "has no ACL authorizer"), (True, "not named by its settings")):
        task = RemoteTopicProtection(FerryConfig(clusters=clusters, flows=(plain,)), plain)
        task._acls.has_authorizer = lambda authorizer=authorizer: authorizer  # type: ignore[method-assign]
        said = task.protect().skipped
        assert len(said) == 1 and why in said[0], said
        assert "remote topics of A->B on B are not protected" in said[0]
        assert task.protect().skipped == ()  # said once
