"""`ferry doctor`: read each target's remote and internal topics, judge their durability, and
check that ferry's principal has the ACLs it needs on each side (`ferry.ops.access`).

Reads only (metadata, topic configs, authorized operations); the rules are in
`ferry.ops.durability` and `ferry.ops.permissions`.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.offsets.groups import GroupAdmin, group_filter
from ferry.ops.access import check_access
from ferry.ops.durability import Finding, TopicFacts, judge_producer, judge_topic

__all__ = ["diagnose"]

CONFIG_KEYS = ("min.insync.replicas", "unclean.leader.election.enable")


def diagnose(config: FerryConfig, *, timeout: float = 10.0) -> list[Finding]:
    """Every finding on the targets of the enabled flows, each (kind, cluster, topic) once."""
    findings: dict[tuple[str, str, str | None, str], Finding] = {}
    for flow in config.enabled_flows:
        target = config.clusters[flow.target]
        raw = {**target.common, **target.producer}
        found = judge_producer(target.alias, raw)
        for facts in _facts(target, _topics_of(config, flow, timeout), timeout):
            found += judge_topic(facts)
        source_topic, remote_topic = _copied_pair(config, flow, timeout)
        source = config.clusters[flow.source]
        accepts = group_filter(flow)
        synced = [g for g in GroupAdmin(source, timeout=timeout).groups() if accepts(g)]
        found += check_access(
            flow,
            source,
            target,
            source_topic,
            remote_topic,
            synced[0] if synced else None,
            timeout=timeout,
        )
        for f in found:
            findings.setdefault((f.kind, f.cluster, f.topic, f.detail), f)
    return list(findings.values())


def _list(cluster: ClusterConfig, timeout: float) -> dict[str, Any]:
    with kafka_errors(cluster, "list topics"):
        topics: dict[str, Any] = (
            clients.admin_client(cluster.admin_config()).list_topics(timeout=timeout).topics
        )
    return {name: md for name, md in topics.items() if md.error is None}


def _copied_pair(
    config: FerryConfig, flow: FlowConfig, timeout: float
) -> tuple[str | None, str | None]:
    """A source topic the flow copies and its remote topic, when they exist (what the ACL
    check asks about)."""
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy)
    copied = sorted(t for t in _list(config.clusters[flow.source], timeout) if selector.accepts(t))
    on_target = _list(config.clusters[flow.target], timeout)
    for topic in copied:
        if policy.remote_topic(flow.source, topic) in on_target:
            return topic, policy.remote_topic(flow.source, topic)
    return (copied[0] if copied else None), None


def _topics_of(config: FerryConfig, flow: FlowConfig, timeout: float) -> dict[str, Any]:
    """The flow's remote topics and ferry's internal topics, as they are on the target."""
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy)
    on_target = _list(config.clusters[flow.target], timeout)
    on_source = _list(config.clusters[flow.source], timeout)
    wanted = {policy.remote_topic(flow.source, t) for t in on_source if selector.accepts(t)}
    wanted |= {
        policy.offset_runs_topic(flow.source),
        policy.checkpoints_topic(flow.source),
        policy.consumer_timestamps_topic(flow.source),
    }
    return {name: md for name, md in on_target.items() if name in wanted}


def _facts(cluster: ClusterConfig, topics: dict[str, Any], timeout: float) -> list[TopicFacts]:
    if not topics:
        return []
    admin = clients.admin_client(cluster.admin_config())
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in sorted(topics)]
    facts = []
    for resource, future in admin.describe_configs(resources).items():
        fix = "grant ferry's principal DESCRIBE_CONFIGS"
        with kafka_errors(cluster, "read its configs", topic=resource.name, fix=fix):
            entries = future.result(timeout)
        md = topics[resource.name]
        rf = min((len(p.replicas) for p in md.partitions.values()), default=0)
        configs = {
            k: str(entries[k].value)
            for k in CONFIG_KEYS
            if k in entries and entries[k].value is not None
        }
        facts.append(TopicFacts(cluster.alias, resource.name, rf, configs))
    return sorted(facts, key=lambda f: f.topic)
