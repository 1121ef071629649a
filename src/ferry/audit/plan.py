"""What an audit reads: `plan_flow` asks the clusters (admin clients only), per topic, for the
source and remote partitions' offsets at the audit's start and the flow's replicated
positions. Positions are read first, so a record copied while the audit reads is never taken
for lost."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ferry.audit.model import FlowPlan, TopicPlan
from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.partition_offsets import log_bounds
from ferry.ops.status import replicated_positions

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["offsets_of", "plan_flow"]


def plan_flow(
    config: FerryConfig, flow: FlowConfig, topics: str, timeout: float = 10.0
) -> FlowPlan:
    """What to read for `flow`: its replicated topics that match `topics` (a regex)."""
    source = config.clusters[flow.source]
    target = config.clusters[flow.target]
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy)
    wanted = re.compile(topics)
    source_admin = clients.admin_client(source.admin_config())
    target_admin = clients.admin_client(target.admin_config())
    with kafka_errors(source, "list topics"):
        source_md = source_admin.list_topics(timeout=timeout)
    with kafka_errors(target, "list topics"):
        target_md = target_admin.list_topics(timeout=timeout)
    names = sorted(
        name
        for name, md in source_md.topics.items()
        if md.error is None
        and selector.accepts(name)
        and not policy.is_heartbeats_topic(name)
        and wanted.fullmatch(name)
    )
    partitions = [(t, p) for t in names for p in source_md.topics[t].partitions]
    # Positions before ends: whatever is copied meanwhile stays below the ends read next.
    positions = replicated_positions(target, flow, partitions, timeout)
    source_offsets = offsets_of(source_admin, source, partitions, timeout)
    plans = []
    for name in names:
        remote = policy.remote_topic(flow.source, name)
        remote_md = target_md.topics.get(remote)
        remote_parts = (
            [(remote, p) for p in remote_md.partitions]
            if remote_md is not None and remote_md.error is None
            else []
        )
        remote_offsets = offsets_of(target_admin, target, remote_parts, timeout)
        plans.append(
            TopicPlan(
                name,
                remote,
                {p: o for (t, p), o in source_offsets.items() if t == name},
                {p: o for (_, p), o in remote_offsets.items()},
                {p: pos for (t, p), pos in positions.items() if t == name},
            )
        )
    return FlowPlan(flow.name, source, target, str(source_md.cluster_id), plans)


def offsets_of(
    admin: AdminClient, cluster: ClusterConfig, partitions: list[tuple[str, int]], timeout: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """(earliest, last stable offset) of each partition."""
    if not partitions:
        return {}
    return log_bounds(cluster, admin, partitions, timeout=timeout)
