"""Topics appearing while running, and active/active flows that must not loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ferry.config import load_config
from ferry.engine.runner import Runner
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    read_all,
    record_count,
    wait_for,
)
from tests.integration.replication_setup import run_beside, run_once, write_config


def test_topic_created_while_running_is_replicated_within_the_refresh_interval(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    first, later = f"{topic_name}-first", f"{topic_name}-later"
    create_topic(a, first, 2)
    produce(a, first, [Rec(i % 2, None, b"v", (), 0) for i in range(100)])
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=f"{topic_name}-.*",
        **{"refresh.topics.interval.seconds": 3},
    )
    runner = Runner(load_config(config), spark=spark)

    def meanwhile() -> None:
        wait_for(lambda: record_count(b, f"A.{first}") == 100, 120, f"A.{first} copied")
        create_topic(a, later, 3)
        produce(a, later, [Rec(i % 3, b"k", b"new", (), 0) for i in range(60)])
        # 3 s refresh interval plus a batch; generous for a loaded 2-core machine.
        wait_for(lambda: record_count(b, f"A.{later}") == 60, 60, f"A.{later} copied")

    progress = run_beside(runner, meanwhile)
    assert progress[0].records == 160


def test_identity_policy_active_active_copies_each_record_once_without_loops(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    for bootstrap in (a, b):
        create_topic(bootstrap, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, f"from-A-{i}".encode(), (), 0) for i in range(50)])
    produce(b, topic_name, [Rec(i % 2, None, f"from-B-{i}".encode(), (), 0) for i in range(40)])
    config = write_config(
        tmp_path,
        kafka_clusters,
        flows=("A->B", "B->A"),
        topics=topic_name,
        **{"replication.policy.class": "IdentityReplicationPolicy"},
    )

    first = run_once(config, spark)
    second = run_once(config, spark)
    third = run_once(config, spark)

    expected = sorted([f"from-A-{i}" for i in range(50)] + [f"from-B-{i}" for i in range(40)])
    for bootstrap in (a, b):
        values = sorted(r.value.decode() for r in read_all(bootstrap, topic_name, 2, 90) if r.value)
        assert values == expected, "every record exactly once in each cluster"
        assert record_count(bootstrap, topic_name) == 90
    copied = sum(p.records for run in (first, second, third) for p in run.values())
    skipped = sum(p.skipped for run in (first, second, third) for p in run.values())
    assert copied == 90
    assert skipped == 90  # every copy was offered back once, and refused
    assert all(p.records == 0 for p in third.values())


def test_source_partitions_added_later_are_added_on_the_target_and_copied(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, b"before", (), 0) for i in range(20)])
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    run_once(config, spark)
    admin = AdminClient({"bootstrap.servers": a})
    admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(30)
    produce(a, topic_name, [Rec(i % 4, None, b"after", (), 0) for i in range(40)])

    run_once(config, spark)

    copied = read_all(b, f"A.{topic_name}", 4, 60)
    assert sorted({r.partition for r in copied if r.value == b"after"}) == [0, 1, 2, 3]
    assert record_count(b, f"A.{topic_name}") == 60


def test_source_topic_deleted_and_recreated_is_copied_again_from_its_start(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    from confluent_kafka.admin import AdminClient

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, [Rec(0, None, b"old", (), 0) for _ in range(50)])
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    run_once(config, spark)
    admin = AdminClient({"bootstrap.servers": a})
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_for(lambda: topic_name not in admin.list_topics(timeout=10).topics, 60, "topic deleted")
    wait_for(lambda: _created(a, topic_name), 60, "topic recreated")
    produce(a, topic_name, [Rec(0, None, b"new", (), 0) for _ in range(10)])

    second = run_once(config, spark)

    assert second["A->B"].records == 10
    values = [r.value for r in read_all(b, f"A.{topic_name}", 1, 60)]
    assert values == [b"old"] * 50 + [b"new"] * 10


def _created(bootstrap: str, topic: str) -> bool:
    try:
        create_topic(bootstrap, topic, 1)
    except Exception:  # still being deleted: try again
        return False
    return True
