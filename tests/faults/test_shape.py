"""A real cluster's shape: 1,000 topics of 10 partitions on the 3-node clusters, 300 holding
records and 700 empty. After `ferry run --once` exits 0, every selected topic exists on the
target with its partitions and its settings (a DR target missing the empty topics fails every
application that fails over to it and writes to one), and every partition of the target's copy
holds exactly as many records as the source's.

A KRaft controller creates at most 10,000 partitions per request, and the remote topics of
such a source are more than that with their metadata records: the run must create them in
batches, wait until the target's brokers know every one, and copy every record."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, submit
from ferry.kafka.log import quiet
from ferry.local.cluster import LocalCluster
from tests.faults.harness import stop_session_runs
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


def _counts(admin: AdminClient, topics: list[str]) -> dict[tuple[int, int], int]:
    """Records per partition (end minus start, read_committed) of every partition of
    `topics`, by the topic's index in `topics` and the partition."""
    partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
    offsets: dict[str, dict[tuple[str, int], int]] = {}
    for which, spec in (("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):  # type: ignore[no-untyped-call]

        def send(batch: list[TopicPartition], spec: Any = spec) -> dict[Any, Any]:
            return admin.list_offsets(
                dict.fromkeys(batch, spec),
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=60,
            )

        futures = submit(send, partitions, MAX_OFFSETS_PARTITIONS_PER_REQUEST)
        offsets[which] = {
            (tp.topic, tp.partition): f.result(90).offset for tp, f in futures.items()
        }
    index = {t: i for i, t in enumerate(topics)}
    return {
        (index[t], p): offsets["end"][(t, p)] - offsets["start"][(t, p)] for t, p in offsets["end"]
    }


def test_a_thousand_topics_most_of_them_empty(
    fault_dir: Path, fault_clusters: dict[str, LocalCluster], tmp_path: Path
) -> None:
    # Alone on the clusters: beside the suite's two `ferry run`s (each asking for every
    # topic's metadata every 2 s) this test took three times as long (515 s against 172).
    stop_session_runs()
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
        # Every record copied: each partition of B's copy holds as many records as A's.
        wanted = _counts(source, names)
        assert sum(wanted.values()) == FULL * PER_TOPIC
        got = _counts(target, [f"P.{n}" for n in names])
        wrong_counts = {
            (names[i], p): (n, got.get((i, p)))
            for (i, p), n in wanted.items()
            if got.get((i, p)) != n
        }
        assert not wrong_counts, f"partitions (A's count, B's): {sorted(wrong_counts.items())[:5]}"
    finally:
        # The suite's later faults run on lighter clusters.
        _in_batches(source, "delete_topics", names)
        present = set(target.list_topics(timeout=60).topics)
        _in_batches(target, "delete_topics", [f"P.{n}" for n in names if f"P.{n}" in present])
