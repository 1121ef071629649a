"""Checkpoints and group offset sync written by `ferry run`.

Checkpoints are read back off the wire with a decoder written here from MM2's schema, not
with ferry's own, so the bytes are checked as MM2's tools would see them.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from ferry.local.cluster import LocalCluster
from tests.integration.group_helpers import commit_group, committed_offsets
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for
from tests.integration.replication_setup import run_once, write_config

Checkpoint = tuple[str, str, int, int, int]  # group, remote topic, partition, upstream, offset


def _string(data: bytes, at: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", data, at)
    return data[at + 2 : at + 2 + size].decode(), at + 2 + size


def _decode(key: bytes, value: bytes) -> Checkpoint:
    group, at = _string(key, 0)
    topic, at = _string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    version, upstream, offset = struct.unpack_from(">hqq", value, 0)
    assert version == 0
    metadata, end = _string(value, 18)
    assert end == len(value) and metadata == ""
    return group, topic, partition, upstream, offset


def _checkpoints(bootstrap: str, source_alias: str) -> list[Checkpoint]:
    """Every checkpoint record in the topic, in the order written."""
    topic = f"{source_alias}.checkpoints.internal"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-checkpoints",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[Checkpoint] = []
    try:
        while True:
            msg = consumer.poll(10)
            assert msg is not None, f"no end of {topic} in 10 s"
            if msg.error() is not None:
                return records
            records.append(_decode(msg.key(), msg.value()))
    finally:
        consumer.close()


def _of(group: str, records: list[Checkpoint]) -> list[tuple[int, int]]:
    return [(upstream, offset) for g, _t, _p, upstream, offset in records if g == group]


def test_checkpoints_stay_monotonic_across_restarts(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    group = f"app-{uuid.uuid4().hex[:6]}"
    create_topic(a, topic_name, 1)
    produce(a, topic_name, [Rec(0, None, f"v{i}".encode(), (), 0) for i in range(100)])
    commit_group(a, group, {(topic_name, 0): 40})
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)

    run_once(config, spark)
    assert _of(group, _checkpoints(b, "A")) == [(40, 40)]

    run_once(config, spark)  # a restart with nothing new: nothing published again
    assert _of(group, _checkpoints(b, "A")) == [(40, 40)]

    # A higher checkpoint was published (say by an earlier run that saw a later copy); the
    # group moves on, but its translation is lower: a restart must not publish it.
    producer = Producer({"bootstrap.servers": b})
    key = struct.pack(">h", len(group)) + group.encode()
    key += struct.pack(">h", len(f"A.{topic_name}")) + f"A.{topic_name}".encode()
    key += struct.pack(">i", 0)
    producer.produce("A.checkpoints.internal", struct.pack(">hqqh", 0, 40, 90, 0), key)
    assert producer.flush(30) == 0
    commit_group(a, group, {(topic_name, 0): 50})
    run_once(config, spark)
    assert _of(group, _checkpoints(b, "A")) == [(40, 40), (40, 90)]

    commit_group(a, group, {(topic_name, 0): 95})
    run_once(config, spark)
    assert _of(group, _checkpoints(b, "A")) == [(40, 40), (40, 90), (95, 95)]


def test_group_sync_skips_active_groups_and_never_rewinds(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    idle, busy = f"idle-{uuid.uuid4().hex[:6]}", f"busy-{uuid.uuid4().hex[:6]}"
    remote = f"A.{topic_name}"
    create_topic(a, topic_name, 2)
    create_topic(b, remote, 2)
    produce(a, topic_name, [Rec(i % 2, None, f"v{i}".encode(), (), 0) for i in range(100)])
    commit_group(a, idle, {(topic_name, 0): 20, (topic_name, 1): 30})
    commit_group(a, busy, {(topic_name, 0): 10})
    commit_group(b, idle, {(remote, 1): 45})  # the group already read further on B
    member = Consumer({"bootstrap.servers": b, "group.id": busy, "enable.auto.commit": False})
    member.subscribe([remote])
    try:
        wait_for(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "a member")
        config = write_config(
            tmp_path, kafka_clusters, topics=topic_name, **{"sync.group.offsets.enabled": "true"}
        )
        run_once(config, spark)
        assert committed_offsets(b, busy) == {}  # active on B: left alone
    finally:
        member.close()
    assert committed_offsets(b, idle) == {(remote, 0): 20, (remote, 1): 45}
    checkpoints = {(g, p): (u, o) for g, _t, p, u, o in _checkpoints(b, "A")}
    assert checkpoints[(busy, 0)] == (10, 10)  # checkpointed even so, for a later failover
