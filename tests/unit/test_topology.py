"""Replication hops and upstream clusters from heartbeats topic names (MM2's MirrorClient)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.graph.hops import replication_hops, upstream_clusters
from ferry.policy import IdentityPolicy, PrefixPolicy, RenamePolicy

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


# Chains of distinct aliases: what replication produces (a policy refuses cycles); loops of
# names are pinned by the examples above.
chains = st.lists(st.lists(st.sampled_from("ABCDEF"), max_size=6, unique=True), max_size=6)


def _heartbeats(chains: list[list[str]]) -> list[str]:
    return [".".join([*chain, "heartbeats"]) for chain in chains]


@given(chains, st.sampled_from("ABCDEFZ"))
def test_a_source_is_reachable_exactly_when_it_is_upstream(
    chains: list[list[str]], source: str
) -> None:
    hops = replication_hops(_heartbeats(chains), PREFIX, source)
    assert (hops != -1) == (source in upstream_clusters(_heartbeats(chains), PREFIX))
    assert hops == -1 or hops >= 1


@given(chains, chains, st.sampled_from("ABCDEF"))
def test_more_routes_never_make_a_source_further_away(
    some: list[list[str]], more: list[list[str]], source: str
) -> None:
    before = replication_hops(_heartbeats(some), PREFIX, source)
    after = replication_hops(_heartbeats(some + more), PREFIX, source)
    assert after == before or (after != -1 and (before == -1 or after < before))


@given(st.lists(st.sampled_from("ABCDEF"), min_size=1, max_size=6, unique=True))
def test_every_alias_of_one_chain_is_upstream_at_its_place(chain: list[str]) -> None:
    topics = _heartbeats([chain])
    assert upstream_clusters(topics, PREFIX) == set(chain)
    # "C.B.A.heartbeats": C copied from B, which copied from A: A is the last, 3 hops away.
    assert [replication_hops(topics, PREFIX, alias) for alias in chain] == list(
        range(1, len(chain) + 1)
    )
