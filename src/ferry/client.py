"""ferry's client library: where a consumer group resumes on another cluster.

For applications and runbooks; imports no PySpark. The role of MirrorMaker 2's
`RemoteClusterUtils`, and it reads MM2's checkpoints as well as ferry's.

    from ferry.client import remote_consumer_offsets, translate_offsets

    # The source is gone: read the checkpoints in the cluster you fail over to.
    offsets = remote_consumer_offsets("billing", "A", "b-broker:9092")
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])

    # Both clusters answer: exact translation of what the group committed right now.
    offsets = translate_offsets("billing", "A", "a-broker:9092", "b-broker:9092")

    # An application that keeps its offsets in its own store (an exactly-once sink):
    # translate them along the flows of ferry's config, one answer per position, in order.
    answers = translate_stored_offsets("ferry.yaml", "A", "B", [("orders", 3, 1234)])

    # A Spark Structured Streaming query reading Kafka: its checkpoint rewritten for B.
    moved = fail_over_spark_checkpoint("ferry.yaml", "/chk/orders", "A", "B")
    stream.option("subscribe", moved.subscribe)

`upstream_clusters(cluster)` and `replication_hops(cluster, "A")` read the topology from the
replicated heartbeats topics (`A.heartbeats`, `B.A.heartbeats`, ...).

Clusters are given as a bootstrap string or a dict of librdkafka settings (for security).
Offsets are keyed by (topic on the target, partition) and are the next record to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ferry.config.model import ClusterConfig, FerryConfig
from ferry.flows.override import FlowControl
from ferry.graph import hops
from ferry.kafka.errors import kafka_errors
from ferry.locations import is_local
from ferry.offsets.application_offsets import (
    StoredOffset,
    Translated,
    Untranslatable,
    translate_stored,
)
from ferry.offsets.groups import GroupAdmin
from ferry.offsets.runs_and_checkpoints import CheckpointStore, RunsStore
from ferry.offsets.spark_checkpoint import CheckpointRefused, CheckpointRewrite
from ferry.offsets.spark_checkpoint_io import (
    CheckpointStorage,
    LocalStorage,
)
from ferry.offsets.spark_checkpoint_io import (
    fail_over_spark_checkpoint as _fail_over_checkpoint,
)
from ferry.policy import IdentityPolicy, PrefixPolicy, ReplicationPolicy

__all__ = [
    "CheckpointRefused",
    "CheckpointRewrite",
    "StoredOffset",
    "Translated",
    "Untranslatable",
    "fail_over_spark_checkpoint",
    "remote_consumer_offsets",
    "replication_hops",
    "translate_offsets",
    "translate_stored_offsets",
    "upstream_clusters",
]

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

    Uses ferry's offset runs in `target`, so nothing is lost and nothing delivered twice.
    Partitions whose copy does not exist on `target` are left out; a copy that exists but
    holds nothing from the source yet maps to its start, as `ferry failover` does.
    """
    source_cluster = _cluster(source_alias, source)
    target_cluster = _cluster("target", target)
    naming = _policy(policy, separator, source_alias)
    committed = GroupAdmin(source_cluster, timeout=timeout).committed(group)
    target_admin = GroupAdmin(target_cluster, timeout=timeout)
    with kafka_errors(target_cluster, "list topics"):
        topics = target_admin.list_topics()
    topic = naming.offset_runs_topic(source_alias)
    runs = RunsStore(target_cluster, topic, source_alias, timeout=timeout)
    try:
        runs.refresh()
        offsets = {}
        for (t, p), upstream in sorted(committed.items()):
            remote = naming.remote_topic(source_alias, t)
            meta = topics.get(remote)
            if meta is None or meta.error is not None or p not in meta.partitions:
                continue
            offsets[(remote, p)] = runs.index(t, p).downstream(upstream).offset
        return offsets
    finally:
        runs.close()


def translate_stored_offsets(
    config: FerryConfig | str | Path,
    from_alias: str,
    to_alias: str,
    positions: Iterable[StoredOffset | Untranslatable | tuple[str, int, int]],
    *,
    control: FlowControl | None = None,
    timeout: float = 10.0,
) -> list[Translated | Untranslatable]:
    """Exact translation of offsets an application keeps itself, for one that fails over
    on its own (an exactly-once sink storing its input offsets beside its output).

    `config`: ferry's config (a loaded `FerryConfig` or the path of ferry.yaml / MM2
    .properties): its clusters and flows say how records travel from `from_alias` to
    `to_alias`, directly or over a chain of flows. `positions`: (topic, partition, offset)
    on `from_alias`, each "the next record to read", as Kafka commits it.

    Returns one answer per position, in order. A `Translated` says the remote topic,
    partition and offset on `to_alias`: the copy of the first record at or after the
    position (a position in a compaction gap, on a transaction marker or an aborted record
    lands on the copy of the next record). An `Untranslatable` says why not: the topic is
    not replicated there, nothing of the partition was replicated yet, or the offset is
    beyond what has been replicated (the message says the replicated position; run ferry
    until it has caught up, then translate again). Nothing is read on `from_alias`: the
    offset runs live in each flow's target, so this works when `from_alias` is lost.

    Raises `KafkaUnavailableError` (naming the cluster) when a cluster whose runs are
    needed does not answer, `ConfigError` for an unknown alias. `control`: the direct
    flow's topics added or removed over ferry's API, when they matter.
    """
    if not isinstance(config, FerryConfig):
        from ferry.config import load_config

        config = load_config(config)
    given = [StoredOffset(*p) if isinstance(p, tuple) else p for p in positions]
    return translate_stored(config, from_alias, to_alias, given, control=control, timeout=timeout)


def fail_over_spark_checkpoint(
    config: FerryConfig | str | Path,
    checkpoint: str | Path | CheckpointStorage,
    from_alias: str,
    to_alias: str,
    *,
    sink_log: str | Path | CheckpointStorage | None = None,
    dry_run: bool = False,
    control: FlowControl | None = None,
    timeout: float = 10.0,
) -> CheckpointRewrite:
    """Move a Spark Structured Streaming query that reads Kafka from `from_alias` to
    `to_alias` by rewriting its checkpoint; restart it there subscribed to `.subscribe`.

    The last committed batch's offsets (`offsets/<N>`) are translated exactly through ferry's
    offset runs, the topics renamed by the flow's replication policy; a batch planned but not
    committed is translated when every end offset has a copy, otherwise removed (its sink
    holds no entry for it, so Spark plans it again) or clamped to the end of the copies (the
    sink holds it and skips its re-run): `sink_log` is that sink's batch log
    (`<output>/_spark_metadata`), needed only then. The originals go to `.backup` inside
    the checkpoint. `dry_run`: change nothing, say what would change.

    `checkpoint` and `sink_log`: local paths (or file: URIs), or a `CheckpointStorage`; for
    another filesystem pass `ferry.engine.spark.checkpoint_files.HadoopStorage(spark, uri)`.
    Raises `CheckpointRefused` (naming the file, nothing changed) when the query cannot
    resume exactly, `KafkaUnavailableError` when the target's runs cannot be read.
    """
    if not isinstance(config, FerryConfig):
        from ferry.config import load_config

        config = load_config(config)
    storage = _storage(checkpoint)
    sink = _storage(sink_log) if sink_log is not None else None
    return _fail_over_checkpoint(
        config,
        storage,
        from_alias,
        to_alias,
        sink=sink,
        dry_run=dry_run,
        control=control,
        timeout=timeout,
    )


def _storage(location: str | Path | CheckpointStorage) -> CheckpointStorage:
    if not isinstance(location, str | Path):
        return location
    if not is_local(location):
        raise ValueError(
            f"{location}: not a local path; pass "
            "ferry.engine.spark.checkpoint_files.HadoopStorage(spark, location) instead"
        )
    return LocalStorage(location)


def _topic_names(cluster: Cluster, timeout: float) -> list[str]:
    config = _cluster("cluster", cluster)
    with kafka_errors(config, "list topics"):
        return list(GroupAdmin(config, timeout=timeout).list_topics())


def upstream_clusters(cluster: Cluster, *, separator: str = ".", timeout: float = 10.0) -> set[str]:
    """Every cluster whose data reaches `cluster`, over any number of hops (MM2's
    `RemoteClusterUtils.upstreamClusters`), read from its replicated heartbeats topics."""
    return hops.upstream_clusters(_topic_names(cluster, timeout), PrefixPolicy(separator))


def replication_hops(
    cluster: Cluster, source_alias: str, *, separator: str = ".", timeout: float = 10.0
) -> int:
    """How many hops data from `source_alias` takes to reach `cluster`; -1 if it never does
    (MM2's `RemoteClusterUtils.replicationHops`)."""
    topics = _topic_names(cluster, timeout)
    return hops.replication_hops(topics, PrefixPolicy(separator), source_alias)
