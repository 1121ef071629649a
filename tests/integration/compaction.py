"""Compacted topics with real gaps: wait for the log cleaner, read offsets back with gaps."""

from __future__ import annotations

import itertools
import uuid

from confluent_kafka import Consumer, TopicPartition

from tests.integration.kafka_helpers import Rec, produce, wait_for


def has_gap(records: list[tuple[int, Rec]]) -> bool:
    offsets = [o for o, _ in records]
    return any(b - a > 1 for a, b in itertools.pairwise(offsets))


def read_all_with_gaps(
    bootstrap: str, topic: str, partitions: int
) -> dict[int, list[tuple[int, Rec]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex[:6]}"})
    highs = {}
    for p in range(partitions):
        highs[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
    consumer.close()
    out: dict[int, list[tuple[int, Rec]]] = {}
    for p in range(partitions):
        out[p] = _read_partition_to(bootstrap, topic, p, highs[p])
    return out


def _read_partition_to(
    bootstrap: str, topic: str, partition: int, high: int
) -> list[tuple[int, Rec]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[tuple[int, Rec]] = []
    done = high == 0
    while not done:
        for msg in consumer.consume(1000, 1.0):
            if msg.error() is not None:
                done = True  # end of partition
                continue
            out.append((msg.offset(), Rec(partition, msg.key(), msg.value(), (), 0)))
            done = done or msg.offset() >= high - 1
    consumer.close()
    return out


def wait_for_compaction(bootstrap: str, topic: str) -> None:
    def compacted() -> bool:
        # Keep rolling segments so the cleaner finds a closed, dirty one.
        produce(bootstrap, topic, [Rec(0, b"roll", b"x", (), 0), Rec(1, b"roll", b"x", (), 0)])
        return any(has_gap(v) for v in read_all_with_gaps(bootstrap, topic, 2).values())

    wait_for(compacted, 90, f"the log cleaner compacted {topic}")
