"""Which clusters a cluster's data comes from, read from its heartbeats topics' names.

Pure code, no I/O: MM2's `MirrorClient.upstreamClusters` and `replicationHops`. Every flow
copies heartbeats, so a cluster holding `B.A.heartbeats` receives A's data through B, two
hops away. Both walks stop at a source seen before: a policy that cannot keep names from
looping (identity) must not hang them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ferry.policy import ReplicationPolicy

__all__ = ["replication_hops", "upstream_clusters"]


def _heartbeats(topics: Iterable[str], policy: ReplicationPolicy) -> list[str]:
    return [t for t in topics if policy.is_heartbeats_topic(t)]


def upstream_clusters(topics: Iterable[str], policy: ReplicationPolicy) -> set[str]:
    """Every cluster alias named along any heartbeats topic among `topics`."""
    sources: set[str] = set()
    for topic in _heartbeats(topics, policy):
        seen: set[str] = set()
        current: str | None = topic
        source = policy.topic_source(topic)
        while current is not None and source is not None and source not in seen:
            seen.add(source)
            current = policy.upstream_topic(current)
            source = policy.topic_source(current) if current is not None else None
        sources |= seen
    return sources


def _hops(topic: str, source_alias: str, policy: ReplicationPolicy) -> int:
    hops = 0
    seen: set[str] = set()
    current: str | None = topic
    while current is not None:
        hops += 1
        source = policy.topic_source(current)
        if source is None:
            return -1
        if source == source_alias:
            return hops
        if source in seen:
            return -1  # a loop of names: `source_alias` is not on it
        seen.add(source)
        current = policy.upstream_topic(current)
    return -1


def replication_hops(topics: Iterable[str], policy: ReplicationPolicy, source_alias: str) -> int:
    """Fewest hops from `source_alias` to the cluster holding `topics`; -1 if none leads there.

    A replicated heartbeats topic is one hop per prefix: `A.heartbeats` is 1 hop from A,
    `B.A.heartbeats` 2. The local `heartbeats` topic names no source and counts for nothing.
    """
    found = [
        hops
        for hops in (_hops(t, source_alias, policy) for t in _heartbeats(topics, policy))
        if hops != -1
    ]
    return min(found, default=-1)
