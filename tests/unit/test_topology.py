"""Replication hops and upstream clusters from heartbeats topic names (MM2's MirrorClient)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.policy import IdentityPolicy, PrefixPolicy, RenamePolicy
from ferry.topology import replication_hops, upstream_clusters

PREFIX = PrefixPolicy()
TOPICS = ["heartbeats", "A.heartbeats", "C.B.A.heartbeats", "B.A.heartbeats", "orders", "A.x"]


def test_hops_count_the_prefixes_up_to_the_source() -> None:
    assert replication_hops(["B.A.heartbeats"], PREFIX, "A") == 2
    assert replication_hops(["B.A.heartbeats"], PREFIX, "B") == 1
    assert replication_hops(["C.B.A.heartbeats"], PREFIX, "A") == 3


def test_hops_take_the_shortest_route() -> None:
    assert replication_hops(TOPICS, PREFIX, "A") == 1
    assert replication_hops(TOPICS, PREFIX, "B") == 1
    assert replication_hops(TOPICS, PREFIX, "C") == 1


def test_unknown_source_and_local_heartbeats_are_unreachable() -> None:
    assert replication_hops(TOPICS, PREFIX, "Z") == -1
    assert replication_hops(["heartbeats"], PREFIX, "A") == -1
    assert replication_hops([], PREFIX, "A") == -1


def test_only_heartbeats_topics_count() -> None:
    assert replication_hops(["A.orders", "B.A.orders"], PREFIX, "A") == -1
    assert upstream_clusters(["A.orders", "heartbeats"], PREFIX) == set()


def test_upstream_clusters_are_every_source_along_every_heartbeats_topic() -> None:
    assert upstream_clusters(TOPICS, PREFIX) == {"A", "B", "C"}
    assert upstream_clusters(["X.heartbeats"], PREFIX) == {"X"}


def test_a_loop_of_names_ends_the_walk() -> None:
    # B.A.B.A... cannot be produced by the prefix policy's cycle check, but names can lie.
    looping = ["A.B.A.B.heartbeats"]
    assert replication_hops(looping, PREFIX, "Z") == -1
    assert replication_hops(looping, PREFIX, "B") == 2
    assert upstream_clusters(looping, PREFIX) == {"A", "B"}


def test_identity_policy_still_prefixes_heartbeats() -> None:
    policy = IdentityPolicy("B")
    assert replication_hops(["B.A.heartbeats", "orders"], policy, "A") == 2
    assert upstream_clusters(["B.A.heartbeats", "orders"], policy) == {"A", "B"}


def test_rename_policy_with_source() -> None:
    policy = RenamePolicy("${source}-${topic}")
    assert replication_hops(["A-heartbeats"], policy, "A") == 1
    assert upstream_clusters(["B-A-heartbeats"], policy) == {"A", "B"}


aliases = st.lists(st.sampled_from("ABCDEF"), min_size=0, max_size=8)


def _until_repeat(chain: list[str]) -> list[str]:
    """The aliases a walk sees: it stops at the first alias named twice (a loop)."""
    seen: list[str] = []
    for alias in chain:
        if alias in seen:
            break
        seen.append(alias)
    return seen


@given(st.lists(aliases, max_size=6), st.sampled_from("ABCDEFZ"))
def test_hops_is_the_position_of_the_source_in_the_shortest_chain(
    chains: list[list[str]], source: str
) -> None:
    topics = [".".join([*chain, "heartbeats"]) for chain in chains]
    walked = [_until_repeat(chain) for chain in chains]
    expected = [w.index(source) + 1 for w in walked if source in w]
    hops = replication_hops(topics, PREFIX, source)
    assert hops == min(expected, default=-1)
    assert (hops != -1) == (source in upstream_clusters(topics, PREFIX))


@given(st.lists(aliases, max_size=6))
def test_upstream_clusters_are_the_aliases_named_before_a_loop(chains: list[list[str]]) -> None:
    topics = [".".join([*chain, "heartbeats"]) for chain in chains]
    expected = {alias for chain in chains for alias in _until_repeat(chain)}
    assert upstream_clusters(topics, PREFIX) == expected
