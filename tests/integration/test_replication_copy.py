"""`ferry run --once` copies faithfully: every record, in order, with all its parts."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ferry.engine.copy.native_loop import native_module
from ferry.kafka.offset_runs import OffsetSyncRecord
from ferry.kafka.provenance import Origin
from ferry.local.cluster import LocalCluster
from tests.integration.compaction import has_gap, read_all_with_gaps, wait_for_compaction
from tests.integration.kafka_helpers import (
    Rec,
    cluster_id,
    create_topic,
    produce,
    read_offsets,
    record_count,
)
from tests.integration.replication_setup import origin_of, run_once, without_origin, write_config

# Explicit timestamps, recent enough that retention (7 days) does not delete them meanwhile.
NOW_MS = int(time.time() * 1000)
HEADER_SETS: list[tuple[tuple[str, bytes | None], ...]] = [
    (),
    (("trace", b"1"), ("trace", b"2"), ("empty", None)),
    (("b", b"x"),),
]


def _records(partitions: int, count: int, salt: int) -> list[Rec]:
    out = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{salt}-{i % 50}".encode()
        value = None if i % 11 == 0 else f"value-{salt}-{i}".encode() * (1 + i % 5)
        if i % 13 == 0:
            key, value = b"", b"" if value is not None else None  # empty is not null
        out.append(Rec(i % partitions, key, value, HEADER_SETS[i % 3], NOW_MS - 60_000 + i))
    return out


NATIVE = pytest.param(
    "native",
    marks=pytest.mark.skipif(
        native_module() is None, reason="native copy loop not built (no C compiler at install)"
    ),
)


@pytest.mark.parametrize("copier", [NATIVE, "python"])
def test_three_topics_copied_record_for_record(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    copier: str,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    layout = {f"{topic_name}-four": 4, f"{topic_name}-two": 2, f"{topic_name}-one": 1}
    sources: dict[str, list[Rec]] = {}
    for salt, (topic, partitions) in enumerate(layout.items()):
        create_topic(a, topic, partitions)
        sources[topic] = _records(partitions, 10_000 + salt, salt)
        produce(a, topic, sources[topic])
    config = write_config(
        tmp_path, kafka_clusters, topics=f"{topic_name}-.*", **{"ferry.copier": copier}
    )

    progress = run_once(config, spark)

    assert progress["A->B"].copier == copier  # the loop asked for ran (native: it loaded)
    assert progress["A->B"].records == sum(len(r) for r in sources.values())
    source_id = cluster_id(a)
    for topic, partitions in layout.items():
        total = len(sources[topic])
        original = read_offsets(a, topic, partitions, total)
        copied = read_offsets(b, f"A.{topic}", partitions, total)
        for p in range(partitions):
            assert [without_origin(r) for _, r in copied[p]] == [r for _, r in original[p]]
            origins = [Origin.from_bytes(origin_of(r)) for _, r in copied[p]]
            assert origins == [Origin(source_id, "A", topic, p, o) for o, _ in original[p]]
        meta = Consumer({"bootstrap.servers": b, "group.id": "t"}).list_topics(timeout=10)
        assert len(meta.topics[f"A.{topic}"].partitions) == partitions


def test_offset_runs_map_every_copied_offset(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, _records(2, 500, 9))
    run_once(write_config(tmp_path, kafka_clusters, topics=topic_name), spark)

    runs = _read_runs(b, "ferry-offset-runs.A.internal", topic_name)
    copied = read_offsets(b, f"A.{topic_name}", 2, 500)
    for p in range(2):
        mapping = {
            run.upstream_start + i: run.downstream_start + i
            for run in runs.get(p, [])
            for i in range(run.count)
        }
        expected = {Origin.from_bytes(origin_of(r)).offset: o for o, r in copied[p]}
        assert mapping == expected


def _read_runs(bootstrap: str, runs_topic: str, topic: str) -> dict[int, list[Any]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(runs_topic, 0, 0)])
    _, high = consumer.get_watermark_offsets(TopicPartition(runs_topic, 0), timeout=10)
    runs: dict[int, list[Any]] = {}
    position = 0
    while position < high:
        for msg in consumer.consume(1000, 1.0):
            assert msg.error() is None
            position = msg.offset() + 1
            record = OffsetSyncRecord.from_bytes(msg.key(), msg.value())
            if record.topic == topic:
                runs.setdefault(record.partition, []).append(record.run)
    consumer.close()
    return runs


def test_aborted_transactions_are_not_copied(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    producer = Producer({"bootstrap.servers": a, "transactional.id": f"t-{topic_name}"})
    producer.init_transactions(30)
    committed: list[bytes] = []
    for txn in range(12):
        producer.begin_transaction()
        values = [f"txn-{txn}-{i}".encode() for i in range(25)]
        for value in values:
            producer.produce(topic_name, value, partition=0)
        if txn % 3 == 1 or txn == 11:  # the last transaction of the log is aborted too
            # Written before the abort, so the log holds them; an abort racing its own
            # produce requests was refused once by the broker (INVALID_TXN_STATE).
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    run_once(write_config(tmp_path, kafka_clusters, topics=topic_name), spark)

    copied = read_offsets(b, f"A.{topic_name}", 1, len(committed))
    assert [r.value for _, r in copied[0]] == committed
    assert record_count(b, f"A.{topic_name}") == len(committed)


def test_compacted_topic_with_gaps_and_an_empty_partition(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(
        a,
        topic_name,
        3,
        **{
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "0",
        },
    )
    # Partition 2 stays empty. Keys repeat, so compaction leaves gaps in partitions 0 and 1.
    produce(
        a,
        topic_name,
        [Rec(i % 2, f"k{i % 10}".encode(), f"v{i}".encode(), (), 0) for i in range(400)],
    )
    wait_for_compaction(a, topic_name)
    source = read_all_with_gaps(a, topic_name, 3)
    assert any(has_gap(offsets) for offsets in source.values()), "compaction left no gap"

    run_once(write_config(tmp_path, kafka_clusters, topics=topic_name), spark)

    total = sum(len(v) for v in source.values())
    copied = read_offsets(b, f"A.{topic_name}", 3, total)
    for p in range(3):
        assert [without_origin(r).value for _, r in copied[p]] == [r.value for _, r in source[p]]
        origins = [Origin.from_bytes(origin_of(r)).offset for _, r in copied[p]]
        assert origins == [o for o, _ in source[p]]
    assert copied[2] == []
    assert _topic_config(b, f"A.{topic_name}")["cleanup.policy"] == "compact"


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}
