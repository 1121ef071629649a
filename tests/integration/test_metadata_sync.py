"""Metadata follows the data while `ferry run` runs: heartbeats, topic configs, `ferry status`.

One continuous run (a Spark start costs about 10 s) checks them all: A's heartbeats reach B
as `A.heartbeats` in MM2's byte format (decoded here independently, with struct), source
config changes reach the remote topic within the sync interval except excluded keys, and
`ferry status` reports a small latency while copying and a growing one once ferry stopped.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
)

from ferry.client import replication_hops, upstream_clusters
from ferry.config import load_config
from ferry.engine.runner import Runner
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count, wait_for
from tests.integration.replication_setup import run_beside, run_once, write_config


def _configs(bootstrap: str, topic: str) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries: dict[str, Any] = admin.describe_configs([resource])[resource].result(30)
    return entries


def _set(bootstrap: str, topic: str, **settings: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in settings.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _decode_mm2_heartbeat(key: bytes, value: bytes) -> tuple[str, str, int, int]:
    """MM2's Heartbeat, written out from its Struct schema: not ferry's own decoder."""
    (n,) = struct.unpack_from(">h", key, 0)
    source = key[2 : 2 + n].decode()
    (m,) = struct.unpack_from(">h", key, 2 + n)
    target = key[4 + n : 4 + n + m].decode()
    assert len(key) == 4 + n + m, "trailing bytes in the key"
    assert len(value) == 10, "value is INT16 version + INT64 timestamp"
    version, timestamp = struct.unpack(">hq", value)
    return source, target, version, timestamp


def _heartbeats_on(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    count = record_count(bootstrap, topic)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-heartbeats", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    records: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while len(records) < count and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                assert msg.error() is None, msg.error()
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None
                records.append((key, value))
    finally:
        consumer.close()
    return records


def _status(config: Path) -> dict[str, Any]:
    """`ferry status --json` as a process of its own: it is also polled from the thread beside
    the runner, where the in-process CLI (signal handlers, file descriptors) cannot run."""
    result = subprocess.run(
        [sys.executable, "-m", "ferry", "status", "-c", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    flows: dict[str, Any] = json.loads(result.stdout)["flows"]
    return flows["A->B"]


@pytest.fixture
def heartbeats_topics(kafka_clusters: dict[str, LocalCluster]) -> Iterator[None]:
    """`heartbeats` on A is shared by every flow out of A: removed after, so that other tests'
    flows (which copy it whatever their topics) count only their own records."""
    yield
    for alias, topic in (("A", "heartbeats"), ("B", "A.heartbeats")):
        admin = AdminClient({"bootstrap.servers": kafka_clusters[alias].bootstrap})
        if topic in admin.list_topics(timeout=10).topics:
            admin.delete_topics([topic])[topic].result(30)
        wait_for(
            lambda: topic not in admin.list_topics(timeout=10).topics,  # noqa: B023
            30,
            f"{topic} deleted on {alias}",
        )


@pytest.mark.usefixtures("heartbeats_topics")
def test_heartbeats_configs_and_status_follow_the_data_while_running(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    remote = f"A.{topic_name}"
    create_topic(a, topic_name, 2, **{"retention.ms": "3600000"})
    produce(a, topic_name, [Rec(i % 2, b"k%d" % i, b"v", (), 0) for i in range(20)])
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,  # heartbeats are copied although not listed
        **{
            "emit.heartbeats.enabled": "true",
            "sync.topic.configs.interval.seconds": 1,
            "refresh.topics.interval.seconds": 1,
        },
    )
    started_ms = int(time.time() * 1000)
    seen: dict[str, Any] = {}

    def meanwhile() -> None:
        wait_for(lambda: record_count(b, remote) == 20, 120, f"{remote} copied")
        wait_for(lambda: record_count(b, "A.heartbeats") >= 2, 60, "A.heartbeats on B")
        assert _configs(b, remote)["retention.ms"].value == "3600000"  # copied at creation

        # One request, so any sync pass that sees one change sees all three. min.insync.replicas
        # is excluded (MM2's default): it is the target's own business. 2 is not what B has.
        _set(
            a, topic_name, retention_ms="7200000", cleanup_policy="compact", min_insync_replicas="2"
        )

        def synced() -> bool:
            entries = _configs(b, remote)
            return (
                entries["retention.ms"].value == "7200000"
                and entries["cleanup.policy"].value == "compact"
            )

        wait_for(synced, 30, f"retention.ms and cleanup.policy of {topic_name} synced")
        entries = _configs(b, remote)
        assert entries["min.insync.replicas"].value != "2", "an excluded key was synced"
        assert entries["min.insync.replicas"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

        # A partition added to the source while ferry runs: added on B, its records copied.
        admin = AdminClient({"bootstrap.servers": a})  # kept: its futures need it alive
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        produce(a, topic_name, [Rec(2, b"new", b"v", (), 0) for _ in range(10)])
        wait_for(lambda: record_count(b, remote) == 30, 60, f"partition 2 of {remote} copied")

        def fresh() -> bool:
            seen["running"] = _status(config)
            latency = seen["running"]["latency_ms"]
            # The position on the target follows the copies by up to a commit interval.
            mine = [p for p in seen["running"]["partitions"] if p["topic"] == topic_name]
            caught_up = len(mine) == 3 and all(p["lag"] == 0 for p in mine)
            # The run's counters reach the status once the slice that copied them is committed.
            counted = seen["running"]["records"] >= 30 and seen["running"]["bytes"] > 0
            return latency is not None and latency < 5000 and caught_up and counted

        wait_for(
            fresh, 60, "ferry status reports a heartbeat latency under 5 s, no lag, 30 records"
        )

    run_beside(Runner(load_config(config), spark=spark), meanwhile)

    running = seen["running"]
    mine = [p for p in running["partitions"] if p["topic"] == topic_name]
    assert [(p["partition"], p["source_end"], p["replicated"], p["lag"]) for p in mine] == [
        (0, 10, 10, 0),
        (1, 10, 10, 0),
        (2, 10, 10, 0),
    ]
    assert running["records"] >= 30 and running["bytes"] > 0  # plus the heartbeats copied
    # Stopped: no heartbeat arrives any more, so latency grows with the wall clock, which is
    # the clock `ferry status` reads (now - newest heartbeat's timestamp, in whole ms).
    first = time.time()
    stopped = _status(config)
    later = _status(config)
    elapsed_ms = (time.time() - first) * 1000
    assert stopped["latency_ms"] is not None and later["latency_ms"] is not None
    growth = later["latency_ms"] - stopped["latency_ms"]
    # Both clock reads fall between `first` and now: the growth is at most that time (+1 ms
    # for the truncation of each read to whole milliseconds).
    assert 0 < growth <= elapsed_ms + 2, (stopped, later, elapsed_ms)

    human = run_ferry("status", "-c", str(config), timeout=60)
    assert human.returncode == 0, human.stdout + human.stderr
    assert "flow A->B: latency " in human.stdout and topic_name in human.stdout, human.stdout

    # `--once` runs every control-plane task once after copying (heartbeats, config sync).
    once = run_once(config, spark)
    assert once["A->B"].done
    after = _status(config)
    assert all(p["lag"] == 0 for p in after["partitions"] if p["topic"] == topic_name)
    assert after["partitions"] and not after["errors"]

    beats = [_decode_mm2_heartbeat(k, v) for k, v in _heartbeats_on(b, "A.heartbeats")]
    assert len(beats) >= 2
    now_ms = int(time.time() * 1000)
    for source, target, version, timestamp in beats:
        assert (source, target, version) == ("A", "B", 0)
        assert started_ms <= timestamp <= now_ms
    on_a = [
        t for *_, t in (_decode_mm2_heartbeat(k, v) for k, v in _heartbeats_on(a, "heartbeats"))
    ]
    on_b = [t for *_, t in beats]
    assert on_b == sorted(on_b), f"copied out of order: on B {on_b}, on A {on_a}"

    # The client library reads the topology off B's topics, as MM2's RemoteClusterUtils does.
    assert replication_hops(b, "A") == 1
    assert replication_hops(b, "Z") == -1
    assert "A" in upstream_clusters(b)
