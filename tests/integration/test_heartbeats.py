"""Heartbeats against a real broker: a topic the source refuses turns them off, once, loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from ferry.config import load_config
from ferry.errors import ReplicationError
from ferry.local.cluster import LocalCluster
from ferry.sync.heartbeats import HeartbeatEmitter, ensure_heartbeats_topic
from tests.integration.replication_setup import write_config


def test_replication_factor_above_the_broker_count_turns_heartbeats_off_with_the_fix(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=topic_name,
            **{"emit.heartbeats.enabled": "true", "heartbeats.topic.replication.factor": 3},
        )
    )
    source = config.clusters["A"]
    with pytest.raises(ReplicationError) as refused:
        ensure_heartbeats_topic(source, topic_name, 3)
    assert "heartbeats.topic.replication.factor" in str(refused.value)

    emitter = HeartbeatEmitter(config, config.enabled_flows[0])
    emitter.topic = topic_name  # `heartbeats` itself is shared by the session's flows
    first, second = emitter.emit(), emitter.emit()
    emitter.close()

    assert len(first.skipped) == 1 and first.skipped[0].startswith("heartbeats off: ")
    assert second.skipped == () and second.checkpoints == 0  # said once, then quiet
    admin = AdminClient({"bootstrap.servers": source.bootstrap_servers})
    assert topic_name not in admin.list_topics(timeout=10).topics


def test_emitted_heartbeats_land_in_a_single_partition_compacted_topic(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    from confluent_kafka.admin import ConfigResource

    from ferry.kafka.mm2_records import Heartbeat
    from tests.integration.kafka_helpers import read_all

    config = load_config(
        write_config(
            tmp_path, kafka_clusters, topics=topic_name, **{"emit.heartbeats.enabled": "true"}
        )
    )
    emitter = HeartbeatEmitter(config, config.enabled_flows[0], clock=iter([1.0, 2.5]).__next__)
    emitter.topic = topic_name
    reports = [emitter.emit(), emitter.emit()]
    emitter.close()

    assert [r.checkpoints for r in reports] == [1, 1]
    a = kafka_clusters["A"].bootstrap
    records = read_all(a, topic_name, 1, 2)
    assert [Heartbeat.from_bytes(r.key or b"", r.value or b"") for r in records] == [
        Heartbeat("A", "B", 1000),
        Heartbeat("A", "B", 2500),
    ]
    admin = AdminClient({"bootstrap.servers": a})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    assert (
        admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value == "compact"
    )
    assert len(admin.list_topics(timeout=10).topics[topic_name].partitions) == 1
