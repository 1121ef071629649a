"""ACL sync never lets anyone but the replicator write into a remote topic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.sync.acl_rules import TopicAcl, remote_acls

OPERATIONS = ["READ", "WRITE", "ALL", "DESCRIBE", "ALTER", "DELETE", "CREATE"]


def _remote(acls: list[TopicAcl]) -> set[TopicAcl]:
    return remote_acls(acls, lambda t: t != "private", lambda t: f"A.{t}")


def test_read_stays_all_becomes_read_write_is_dropped() -> None:
    acls = [
        TopicAcl("orders", "User:alice", "*", "READ", "ALLOW"),
        TopicAcl("orders", "User:bob", "*", "ALL", "ALLOW"),
        TopicAcl("orders", "User:carol", "*", "WRITE", "ALLOW"),
        TopicAcl("orders", "User:mallory", "*", "WRITE", "DENY"),
    ]
    assert _remote(acls) == {
        TopicAcl("A.orders", "User:alice", "*", "READ", "ALLOW"),
        TopicAcl("A.orders", "User:bob", "*", "READ", "ALLOW"),
        TopicAcl("A.orders", "User:mallory", "*", "WRITE", "DENY"),
    }


def test_topics_the_flow_does_not_replicate_keep_their_acls_to_themselves() -> None:
    assert _remote([TopicAcl("private", "User:alice", "*", "READ", "ALLOW")]) == set()


acls = st.builds(
    TopicAcl,
    st.sampled_from(["orders", "payments", "private"]),
    st.sampled_from(["User:a", "User:b"]),
    st.just("*"),
    st.sampled_from(OPERATIONS),
    st.sampled_from(["ALLOW", "DENY"]),
)


@given(st.lists(acls, max_size=20))
def test_no_remote_acl_allows_writing_or_everything(source: list[TopicAcl]) -> None:
    for acl in _remote(source):
        assert acl.topic.startswith("A.")
        assert not (acl.permission == "ALLOW" and acl.operation in ("WRITE", "ALL"))
