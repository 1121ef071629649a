"""ferry's client library: where a consumer group resumes on another cluster.

For applications and runbooks; imports no PySpark. The role of MirrorMaker 2's
`RemoteClusterUtils`, and it reads MM2's checkpoints as well as ferry's.

    from ferry.client import remote_consumer_offsets, translate_offsets

    # The source is gone: read the checkpoints in the cluster you fail over to.
    offsets = remote_consumer_offsets("billing", "A", "b-broker:9092")
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])

    # Both clusters answer: exact translation of what the group committed right now.
    offsets = translate_offsets("billing", "A", "a-broker:9092", "b-broker:9092")

Clusters are given as a bootstrap string or a dict of librdkafka settings (for security).
Offsets are keyed by (topic on the target, partition) and are the next record to read.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.config.model import ClusterConfig
from ferry.offsets.groups import GroupAdmin
from ferry.offsets.stores import CheckpointStore, RunsStore
from ferry.policy import IdentityPolicy, PrefixPolicy, ReplicationPolicy

__all__ = ["remote_consumer_offsets", "translate_offsets"]

Cluster = str | Mapping[str, str]


def _cluster(alias: str, cluster: Cluster) -> ClusterConfig:
    if isinstance(cluster, str):
        return ClusterConfig(alias=alias, bootstrap_servers=cluster)
    settings = {k: str(v) for k, v in cluster.items()}
    bootstrap = settings.pop("bootstrap.servers", None)
    if bootstrap is None:
        raise ValueError(f"cluster settings for {alias} lack bootstrap.servers")
    return ClusterConfig(alias=alias, bootstrap_servers=bootstrap, common=settings)


def _policy(policy: str, separator: str, source_alias: str) -> ReplicationPolicy:
    if policy == "prefix":
        return PrefixPolicy(separator)
    if policy == "identity":
        return IdentityPolicy(source_alias, separator)
    raise ValueError(f"policy must be 'prefix' or 'identity', not {policy!r}")


def remote_consumer_offsets(
    group: str,
    remote_alias: str,
    cluster: Cluster,
    *,
    separator: str = ".",
    timeout: float = 10.0,
) -> dict[tuple[str, int], int]:
    """Where `group` resumes on `cluster`, from the checkpoints of flow `remote_alias` -> it.

    Reads `<remote_alias>.checkpoints.internal` on `cluster` (MM2's
    `RemoteClusterUtils.translateOffsets`). As fresh as the last checkpoint interval.
    """
    target = _cluster("target", cluster)
    topic = PrefixPolicy(separator).checkpoints_topic(remote_alias)
    store = CheckpointStore(target, topic, timeout=timeout)
    try:
        return {(c.topic, c.partition): c.offset for c in store.refresh().of_group(group)}
    finally:
        store.close()


def translate_offsets(
    group: str,
    source_alias: str,
    source: Cluster,
    target: Cluster,
    *,
    policy: str = "prefix",
    separator: str = ".",
    timeout: float = 10.0,
) -> dict[tuple[str, int], int]:
    """Exact translation of `group`'s committed offsets on `source` to `target`.

    Uses ferry's offset runs in `target`, so nothing is lost and nothing delivered twice;
    partitions ferry has not replicated are left out.
    """
    source_cluster = _cluster(source_alias, source)
    target_cluster = _cluster("target", target)
    naming = _policy(policy, separator, source_alias)
    committed = GroupAdmin(source_cluster, timeout=timeout).committed(group)
    topic = naming.offset_runs_topic(source_alias)
    runs = RunsStore(target_cluster, topic, source_alias, timeout=timeout)
    try:
        runs.refresh()
        return {
            (naming.remote_topic(source_alias, t), p): runs.index(t, p).downstream(u).offset
            for (t, p), u in sorted(committed.items())
            if runs.has(t, p)
        }
    finally:
        runs.close()
