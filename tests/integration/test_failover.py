"""Failover and failback of a consumer group: zero records lost, zero delivered twice.

A group is committed on A at every kind of position a real group can be at: the beginning,
the middle, the end, inside a gap left by compaction, behind the oldest record retention
kept, and on an empty partition. After `ferry run --once` and `ferry failover`, reading on B
as that group must yield exactly the records the group had not consumed on A, identified by
their origin offsets.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from ferry.client import remote_consumer_offsets, translate_offsets
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.conftest import TEST_BROKER
from tests.ferry_cli import run_ferry
from tests.integration.compaction import read_all_with_gaps, wait_for_compaction
from tests.integration.group_helpers import (
    commit_group,
    committed_offsets,
    consume_origins,
    origin_at,
)
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for
from tests.integration.replication_setup import run_once, write_config

TP = tuple[str, int]


def _delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    for future in futures.values():
        future.result(30)


def _prepare_source(bootstrap: str, name: str) -> tuple[dict[TP, list[int]], dict[TP, int]]:
    """Two topics on `bootstrap` and a group's positions in them.

    Returns the offsets each source partition holds, and the group's committed offsets.
    """
    plain, compacted = name, f"{name}-compacted"
    create_topic(bootstrap, plain, 5)
    records = [
        Rec(p, f"k{i}".encode(), f"v{p}-{i}".encode(), (), 0) for p in range(4) for i in range(100)
    ]
    produce(bootstrap, plain, records)
    _delete_records_before(bootstrap, plain, 3, 30)  # "retention" removed 0..29 of partition 3
    create_topic(
        bootstrap,
        compacted,
        2,
        **{
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "0",
        },
    )
    produce(
        bootstrap,
        compacted,
        [Rec(i % 2, f"k{i % 10}".encode(), f"v{i}".encode(), (), 0) for i in range(300)],
    )
    wait_for_compaction(bootstrap, compacted)
    _stop_cleaning(bootstrap, compacted)
    held: dict[TP, list[int]] = {
        (plain, p): (list(range(30, 100)) if p == 3 else list(range(100)) if p < 4 else [])
        for p in range(5)
    }
    for p, rows in _settled(bootstrap, compacted).items():
        held[(compacted, p)] = [offset for offset, _ in rows]
    kept = held[(compacted, 0)]
    gaps = [a + 1 for a, b in itertools.pairwise(kept) if b - a > 1]
    assert gaps, f"compaction left no gap in {compacted} partition 0: {kept}"
    gap_start = gaps[0]
    positions = {
        (plain, 0): 0,  # beginning
        (plain, 1): 37,  # middle
        (plain, 2): 100,  # end
        (plain, 3): 10,  # behind the oldest retained record (30)
        (plain, 4): 0,  # empty partition
        (compacted, 0): gap_start,  # inside a compacted gap
        (compacted, 1): held[(compacted, 1)][len(held[(compacted, 1)]) // 2],
    }
    return held, positions


def _stop_cleaning(bootstrap: str, topic: str) -> None:
    """No new segment rolls and no cleaning: what A holds must not change under the test."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in {"segment.ms": "86400000", "min.cleanable.dirty.ratio": "0.99"}.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _settled(bootstrap: str, topic: str) -> dict[int, list[tuple[int, Rec]]]:
    """What the topic holds, once two reads in a row agree (a cleaner pass may be running)."""
    reads = [read_all_with_gaps(bootstrap, topic, 2)]

    def stable() -> bool:
        reads.append(read_all_with_gaps(bootstrap, topic, 2))
        return reads[-1] == reads[-2]

    wait_for(stable, 60, f"the contents of {topic} stop changing")
    return reads[-1]


def _unconsumed(
    held: dict[TP, list[int]], positions: dict[TP, int], alias: str
) -> dict[TP, list[int]]:
    """Per remote partition: the source offsets at or after the group's position."""
    return {
        (f"{alias}.{t}", p): [o for o in held[(t, p)] if o >= positions[(t, p)]]
        for t, p in positions
    }


def test_failover_then_failback_is_exact(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    group = f"orders-app-{uuid.uuid4().hex[:6]}"
    held, positions = _prepare_source(a, topic_name)
    commit_group(a, group, positions)
    config = write_config(tmp_path, kafka_clusters, topics=f"{topic_name}.*")
    run_once(config, spark)

    translated = run_ferry(
        "translate", "-c", str(config), "--group", group, "--from", "A", "--to", "B", "--json"
    )
    assert translated.returncode == 0, translated.stderr
    plan = json.loads(translated.stdout)
    assert plan["source"] == "cluster" and not plan["committed"]
    assert committed_offsets(b, group) == {}  # translate changes nothing
    by_partition = {(p["target_topic"], p["partition"]): p["offset"] for p in plan["positions"]}
    assert translate_offsets(group, "A", a, b) == by_partition  # the client library agrees
    assert remote_consumer_offsets(group, "A", b) == by_partition  # and so do checkpoints

    result = run_ferry("failover", "group", "-c", str(config), group, "--from", "A", "--to", "B")
    assert result.returncode == 0, result.stderr
    assert "committed group" in result.stdout

    read = consume_origins(b, group, [(f"A.{t}", p) for t, p in positions])
    assert read == _unconsumed(held, positions, "A")

    # The group reads further on B, then fails back: it must land on A right after the last
    # record it consumed on B.
    on_b = committed_offsets(b, group)
    further = {tp: offset + 5 for tp, offset in on_b.items() if len(read[tp]) >= 5}
    commit_group(b, group, further)
    back = run_ferry(
        "failover", "group", "-c", str(config), group, "--from", "B", "--to", "A", "--json"
    )
    assert back.returncode == 0, back.stderr
    on_a = committed_offsets(a, group)
    for (remote_topic, p), offset in further.items():
        original = remote_topic.removeprefix("A.")
        assert on_a[(original, p)] == origin_at(b, remote_topic, p, offset - 1) + 1


def test_failover_from_checkpoints_when_the_source_is_gone(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    directory = tmp_path / "lost-dc"
    c = local.up(["C"], directory, {"C": TEST_BROKER})["C"]
    try:
        group = f"billing-{uuid.uuid4().hex[:6]}"
        held, positions = _prepare_source(c.bootstrap, topic_name)
        commit_group(c.bootstrap, group, positions)
        clusters = {"C": c, "B": kafka_clusters["B"]}
        config = write_config(tmp_path, clusters, flows=("C->B",), topics=f"{topic_name}.*")
        run_once(config, spark)  # copies, then writes checkpoints
    finally:
        c.kill()  # the datacenter is lost: SIGKILL, no clean shutdown waited for
        local.down(directory)

    result = run_ferry("failover", "group", "-c", str(config), group, "--from", "C", "--to", "B")
    assert result.returncode == 0, result.stderr
    assert "C" in result.stderr and "unreachable" in result.stderr, result.stderr
    assert "translating from the checkpoints in B" in result.stderr
    assert "%3|" not in result.stderr  # librdkafka's connection noise stays in logging
    b = kafka_clusters["B"].bootstrap
    read = consume_origins(b, group, [(f"C.{t}", p) for t, p in positions])
    assert read == _unconsumed(held, positions, "C")


def test_failover_refuses_a_group_with_active_members_on_the_target(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    from confluent_kafka import Consumer

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    group = f"busy-{uuid.uuid4().hex[:6]}"
    create_topic(a, topic_name, 1)
    produce(a, topic_name, [Rec(0, None, b"x", (), 0)] * 10)
    commit_group(a, group, {(topic_name, 0): 4})
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    run_once(config, spark)
    member = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    member.subscribe([f"A.{topic_name}"])
    try:
        wait_for(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "a member")
        result = run_ferry(
            "failover", "group", "-c", str(config), group, "--from", "A", "--to", "B"
        )
    finally:
        member.close()
    assert result.returncode == 1
    assert "active member" in result.stderr and "nothing was changed" in result.stderr


def test_failover_by_timestamp_redelivers_only_the_last_record_consumed(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    from confluent_kafka import Consumer

    from ferry.offsets.consumer_timestamps import ConsumerTimestampsRecorder

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    group = f"ts-app-{uuid.uuid4().hex[:6]}"
    now = int(time.time() * 1000)
    create_topic(a, topic_name, 2)
    produce(
        a,
        topic_name,
        [Rec(i % 2, None, f"v{i}".encode(), (), now - 100_000 + i * 10) for i in range(50)],
    )
    consumer = Consumer({"bootstrap.servers": a, "group.id": group, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(2)])
    consumed = []
    deadline = time.monotonic() + 30
    while len(consumed) < 30 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            consumed.append(msg)
    with ConsumerTimestampsRecorder({"bootstrap.servers": a}, group=group) as recorder:
        positions = recorder.commit(consumer, consumed)
    consumer.close()
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    run_once(config, spark)  # copies the topic, mirrors the timestamps to B

    result = run_ferry(
        "failover", "group", "-c", str(config), group, "--from", "A", "--to", "B",
        "--by-timestamp", "--from-checkpoints",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    read = consume_origins(b, group, [(f"A.{topic_name}", p) for p in range(2)])
    for p in range(2):
        last_consumed = positions[(topic_name, p)].offset - 1
        assert read[(f"A.{topic_name}", p)] == list(range(last_consumed, 25))
