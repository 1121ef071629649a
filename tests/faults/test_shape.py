"""A real cluster's shape: 1,000 topics of 10 partitions on the 3-node clusters, 300 holding
records and 700 empty. After `ferry run --once` exits 0, every selected topic exists on the
target with its partitions and its settings: a DR target missing the empty topics fails every
application that fails over to it and writes to one."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from ferry.kafka.log import quiet
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import exact_producer

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(1200)]

TOPICS, PARTITIONS, FULL, PER_TOPIC = 1000, 10, 300, 50
# Replication factor 1 on both sides: at RF 3 the two clusters hold 60,000 partition replicas,
# which this 2-core test machine cannot serve (the brokers' own produce requests time out after
# 60 s at a load average of 32, ferry aside). What is tested is the shape ferry must plan and
# create on the 3-node clusters: 10,000 partitions spread over three brokers, 7,000 empty.
SHAPE_RF = 1
RETENTION = "172800000"  # two days: a setting the copy must carry to every remote topic
# A single replica must be enough for acks=all (the clusters' default is 2); the flow copies
# this setting too (MM2's default exclusion list drops it).
TOPIC_CONFIG = {"retention.ms": RETENTION, "min.insync.replicas": "1"}


def _in_batches(admin: AdminClient, call: str, items: list, size: int = 100) -> None:  # type: ignore[type-arg]
    for start in range(0, len(items), size):
        for future in getattr(admin, call)(items[start : start + size]).values():
            future.result(300)


@pytest.mark.faults_extended
def test_a_thousand_topics_most_of_them_empty(
    fault_dir: Path, fault_clusters: dict[str, LocalCluster], tmp_path: Path
) -> None:
    a, b = fault_clusters["A"].bootstrap, fault_clusters["B"].bootstrap
    prefix = f"shape-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:04d}" for i in range(TOPICS)]
    source = AdminClient(quiet({"bootstrap.servers": a}))
    target = AdminClient(quiet({"bootstrap.servers": b}))
    _in_batches(
        source,
        "create_topics",
        [NewTopic(n, PARTITIONS, SHAPE_RF, config=TOPIC_CONFIG) for n in names],
    )
    try:
        producer = exact_producer(a, {"request.timeout.ms": 120_000})
        for name in names[:FULL]:
            for i in range(PER_TOPIC):
                producer.produce(name, value=b"%d" % i, partition=i % PARTITIONS)
            producer.poll(0)
        assert producer.flush(300) == 0
        # Its own aliases (P->Q), so its flow shares nothing with the suite's running flows.
        config = tmp_path / "ferry.yaml"
        config.write_text(
            "clusters:\n"
            f"  P: {{bootstrap.servers: '{fault_clusters['A'].link_bootstrap}'}}\n"
            f"  Q: {{bootstrap.servers: '{fault_clusters['B'].link_bootstrap}'}}\n"
            "P->Q.enabled: true\n"
            f"topics: '{prefix}.*'\n"
            f"replication.factor: {SHAPE_RF}\n"
            "config.properties.exclude: 'message\\.timestamp\\.type'\n"
            "emit.heartbeats.enabled: 'false'\n"
            f"ferry.state.dir: '{tmp_path / 'state'}'\n"
        )
        run = subprocess.run(
            [sys.executable, "-m", "ferry", "run", "-c", str(config), "--once"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

        remote = {f"P.{n}" for n in names}
        metadata = target.list_topics(timeout=60).topics
        missing = sorted(remote - set(metadata))
        assert not missing, f"{len(missing)} of {TOPICS} remote topics missing on B: {missing[:5]}"
        wrong = [t for t in remote if len(metadata[t].partitions) != PARTITIONS]
        assert not wrong, f"remote topics without {PARTITIONS} partitions: {wrong[:5]}"
        for start in range(0, TOPICS, 100):
            resources = [ConfigResource("topic", t) for t in sorted(remote)[start : start + 100]]
            for resource, future in target.describe_configs(resources).items():
                value = future.result(60)["retention.ms"].value
                assert value == RETENTION, f"{resource.name}: retention.ms {value}"
        # Every record copied: the remote topics' ends add up to what A holds.
        from confluent_kafka import Consumer

        consumer = Consumer(quiet({"bootstrap.servers": b, "group.id": f"{prefix}count"}))
        try:
            copied = sum(
                consumer.get_watermark_offsets(TopicPartition(f"P.{n}", p), timeout=30)[1]
                for n in names[:FULL]
                for p in range(PARTITIONS)
            )
        finally:
            consumer.close()
        assert copied == FULL * PER_TOPIC
    finally:
        # The suite's later faults run on lighter clusters.
        _in_batches(source, "delete_topics", names)
        present = set(target.list_topics(timeout=60).topics)
        _in_batches(target, "delete_topics", [f"P.{n}" for n in names if f"P.{n}" in present])
