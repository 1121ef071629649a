"""Small real-client helpers for integration tests: create, produce, read back by polling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

# A timestamp for test records: recent enough that retention (7 days) never deletes them
# while a test runs (records stamped years ago vanish at the broker's next retention check).
RECENT_MS = int(time.time() * 1000) - 60_000


@dataclass(frozen=True)
class Rec:
    """What a test compares: everything of a record that replication must keep."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def create_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    client: dict[str, str] | None = None,
    **configs: str,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(client or {})})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)
    admin.create_topics([new])[topic].result(30)


def exact_producer(bootstrap: str, settings: dict[str, Any] | None = None) -> Producer:
    """A producer for records a test counts exactly: idempotent, so that a request retried
    after a timeout on a busy broker (one still loading many partitions, or starved of CPU)
    cannot write its records twice."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            **(settings or {}),
        }
    )


def produce(
    bootstrap: str, topic: str, records: list[Rec], client: dict[str, str] | None = None
) -> None:
    """`client`: more librdkafka settings, e.g. SASL credentials."""
    # Not idempotent: some tests call this every few milliseconds, and an idempotent
    # producer's InitProducerId on each call slowed them several times over.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **(client or {})}
    )
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for r in records:
        producer.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            timestamp=r.timestamp,
            headers=list(r.headers),
            on_delivery=on_delivery,
        )
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not failures, f"{remaining} unacknowledged, errors: {failures}"


def read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout: float = 30.0,
    client: dict[str, str] | None = None,
) -> list[Rec]:
    """Every partition's records from the beginning (partition by partition, in order)."""
    by_partition = read_offsets(bootstrap, topic, partitions, expected, timeout, client)
    return [rec for p in range(partitions) for _, rec in by_partition[p]]


def read_offsets(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout: float = 30.0,
    client: dict[str, str] | None = None,
) -> dict[int, list[tuple[int, Rec]]]:
    """Like read_all, but per partition, with each record's offset (read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **(client or {}),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[tuple[int, Rec]]] = {p: [] for p in range(partitions)}
    count = 0
    deadline = time.monotonic() + timeout
    try:
        while count < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                rec = Rec(
                    msg.partition(),
                    msg.key(),
                    msg.value(),
                    tuple(msg.headers() or ()),  # type: ignore[arg-type]  # bytes values
                    msg.timestamp()[1],
                )
                out[msg.partition()].append((msg.offset(), rec))
                count += 1
    finally:
        consumer.close()
    assert count == expected, f"read {count} of {expected} records from {topic} in {timeout}s"
    return out


def record_count(bootstrap: str, topic: str, client: dict[str, str] | None = None) -> int:
    """Records a topic holds (high minus low watermark summed), 0 if it does not exist."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test-count", **(client or {})}
    )
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        total = 0
        for p in md.partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, p))
            total += high - low
        return total
    finally:
        consumer.close()


def _watermarks(consumer: Consumer, tp: TopicPartition) -> tuple[int, int]:
    """Watermarks, waiting out a just-created partition that has no leader yet."""
    deadline = time.monotonic() + 30
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            return int(low), int(high)
        except KafkaException as exc:
            code = exc.args[0].code()
            transient = code in (
                KafkaError.NOT_LEADER_FOR_PARTITION,
                KafkaError.LEADER_NOT_AVAILABLE,
            )
            if not transient or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until true; fail saying `what` did not happen."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"within {timeout}s: {what}")


def cluster_id(bootstrap: str) -> str:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-cluster-id"})
    try:
        return str(consumer.list_topics(timeout=10).cluster_id)
    finally:
        consumer.close()
