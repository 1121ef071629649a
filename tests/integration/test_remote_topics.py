"""Remote topics: after `ferry run --once` exits 0, every selected topic exists on the target
with its partition count and settings, whether it held records or not (a DR target missing
the empty topics fails the applications that fail over to it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from ferry.local.broker import BrokerProcess
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce
from tests.integration.replication_setup import write_config

TOPICS = 30
EMPTY = 20
PARTITIONS = 3
RETENTION_MS = "3600000"


def test_once_creates_every_selected_topic_on_the_target_empty_or_not(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    names = [f"{topic_name}-{i:02d}" for i in range(TOPICS)]
    for name in names:
        create_topic(a, name, PARTITIONS, **{"retention.ms": RETENTION_MS})
    full = names[EMPTY:]
    for name in full:
        produce(a, name, [Rec(p, b"k", b"v", (), 0) for p in range(PARTITIONS)])
    config = write_config(tmp_path, kafka_clusters, topics=f"{topic_name}-.*")

    result = run_ferry("run", "-c", str(config), "--once")

    assert result.returncode == 0, result.stdout + result.stderr
    admin = AdminClient({"bootstrap.servers": b})
    remote = {f"A.{name}" for name in names}
    listed = admin.list_topics(timeout=30).topics
    missing = sorted(remote - set(listed))
    assert not missing, f"{len(missing)} of {TOPICS} remote topics missing on B: {missing[:3]}"
    for name in sorted(remote):
        assert len(listed[name].partitions) == PARTITIONS, name
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in sorted(remote)]
    for resource, future in admin.describe_configs(resources).items():
        retention = future.result(30)["retention.ms"].value
        assert retention == RETENTION_MS, f"{resource.name}: retention.ms {retention}"
