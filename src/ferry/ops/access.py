"""`ferry doctor`'s ACL check: what ferry's own principal may do on each side of a flow.

Kafka answers this for the asking principal itself (the authorized operations of a topic,
group or the cluster, in DescribeTopics, DescribeGroups and DescribeCluster), so ferry needs no
right to read ACLs to find out. Compared with `ferry.ops.permissions`; transactional ids have
no such question, so their rows are not judged here (a copy that lacks them stops with the
grant to add).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaException, TopicCollection

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.kafka import clients
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable
from ferry.ops.durability import Finding
from ferry.ops.permissions import CAPABILITY_PERMISSIONS, Permission, Side, missing_permissions

__all__ = ["check_access"]

Allowed = dict[tuple[str, str], frozenset[str]]


def _operations(
    cluster: ClusterConfig, future: Future[Any], timeout: float, *, asks_cluster: bool = True
) -> frozenset[str] | None:
    """The operation names granted, empty when the principal may not even describe it, None
    when the cluster did not say. `asks_cluster=False`: an error other than authorization is
    not taken for an unreachable cluster (a group that does not exist yet fails librdkafka's
    ConsumerGroupDescribe with a bare error; the other questions tell whether it answers)."""
    try:
        described = future.result(timeout)
    except KafkaException as exc:  # per code: an authorization refusal is an answer, not a failure
        error = kafka_error_of(exc)
        unreachable = error is None or error.code() in UNREACHABLE_CODES
        if unreachable and asks_cluster:
            raise unavailable(cluster, exc) from None
        if error is None:
            return None
        if "AUTHORIZATION" in error.name():
            return frozenset()
        return None  # e.g. the group or topic does not exist: nothing to judge
    operations = getattr(described, "authorized_operations", None)
    if operations is None:
        return None
    return frozenset(op.name for op in operations)


def _allowed(
    cluster: ClusterConfig,
    topics: dict[str, str],
    groups: dict[str, str],
    timeout: float,
) -> Allowed:
    """`topics` / `groups`: the permission table's name (e.g. '*') -> a real one to ask."""
    admin = clients.admin_client(cluster.admin_config())
    allowed: Allowed = {}
    cluster_ops = _operations(
        cluster,
        admin.describe_cluster(include_authorized_operations=True, request_timeout=timeout),
        timeout,
    )
    if cluster_ops is not None:
        allowed[("CLUSTER", "kafka-cluster")] = cluster_ops
    for row_name, topic in topics.items():
        futures = admin.describe_topics(
            TopicCollection([topic]), include_authorized_operations=True, request_timeout=timeout
        )
        ops = _operations(cluster, futures[topic], timeout)
        if ops is not None:
            allowed[("TOPIC", row_name)] = ops
    for row_name, group in groups.items():
        futures = admin.describe_consumer_groups(
            [group], include_authorized_operations=True, request_timeout=timeout
        )
        ops = _operations(cluster, futures[group], timeout, asks_cluster=False)
        if ops is not None:
            allowed[("GROUP", row_name)] = ops
    return allowed


def _findings(
    flow: FlowConfig, cluster: ClusterConfig, side: Side, allowed: Allowed
) -> Iterable[Finding]:
    principal = cluster.admin_config().get("sasl.username", "<ferry's principal>")
    for row in missing_permissions(side, allowed):
        if not row.needed(flow):
            continue  # e.g. heartbeats' rows with emit.heartbeats.enabled = false
        yield Finding(
            "acl",
            cluster.alias,
            None,
            f"ferry's principal may not {row.describe()} ({row.why}), which it needs as the "
            f"{side} of flow {flow.name}; grant it: {row.grant_command(principal)}",
            "error" if row.stops else "warning",
        )


def _capability_notes(
    flow: FlowConfig, cluster: ClusterConfig, side: Side, allowed: Allowed
) -> Iterable[Finding]:
    """Optional capabilities (`CAPABILITY_PERMISSIONS`) the principal lacks on `cluster`.
    Transactional ids cannot be asked about: their rows are named where the cluster has an
    authorizer (its answer about the cluster withholds something, as nobody grants a
    replicator CLUSTER_ACTION), so an open cluster gets no note it does not need."""
    if side == "source" and flow.source_read_only:
        return  # ferry switchover refuses a read-only source whatever the grants
    principal = cluster.admin_config().get("sasl.username", "<ferry's principal>")
    rows = [
        replace(
            row, name=row.name.replace("<source>", flow.source).replace("<target>", flow.target)
        )
        for row in CAPABILITY_PERMISSIONS
        if row.side == side
    ]
    missing: list[Permission] = list(missing_permissions(side, allowed, tuple(rows)))
    cluster_ops = allowed.get(("CLUSTER", "kafka-cluster"))
    if cluster_ops is not None and "CLUSTER_ACTION" not in cluster_ops:
        missing += [r for r in rows if r.resource == "TRANSACTIONAL_ID"]
    for row in missing:
        unknown = row.resource == "TRANSACTIONAL_ID"
        said = (
            f"needs {row.describe()} ({row.why}), which Kafka cannot be asked about"
            if unknown
            else f"ferry's principal may not {row.describe()} ({row.why})"
        )
        yield Finding(
            "capability",
            cluster.alias,
            None,
            f"optional capability `{row.capability}` of flow {flow.name} (as its {side}): "
            f"{said}; without it that command is refused, replication is not affected; "
            f"grant it: {row.grant_command(principal)}",
            "note",
        )


def check_access(
    flow: FlowConfig,
    source: ClusterConfig,
    target: ClusterConfig,
    source_topic: str | None,
    remote_topic: str | None,
    source_group: str | None = None,
    *,
    timeout: float = 10.0,
) -> list[Finding]:
    """Missing ACLs of `flow`, asked about one topic it copies and its remote copy (so the
    rows for every topic are judged on a real one), the heartbeats topic, a group it syncs
    (one the principal can list) and the flow's progress group."""
    source_topics = {"heartbeats": "heartbeats"}
    if source_topic is not None:
        source_topics["*"] = source_topic
    source_groups = {"*": source_group} if source_group is not None else {}
    target_topics = {"*": remote_topic} if remote_topic is not None else {}
    source_allowed = _allowed(source, source_topics, source_groups, timeout)
    found = list(_findings(flow, source, "source", source_allowed))
    target_allowed = _allowed(target, target_topics, {"*": flow.progress_group}, timeout)
    found += _findings(flow, target, "target", target_allowed)
    found += _capability_notes(flow, source, "source", source_allowed)
    found += _capability_notes(flow, target, "target", target_allowed)
    return found
