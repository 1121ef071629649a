"""Consumer-group helpers for failover tests: commit, read back, consume as the group."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ferry.config.model import ClusterConfig
from ferry.kafka.group_offsets import read_group_offsets
from ferry.kafka.provenance import ORIGIN_HEADER, Origin

TP = tuple[str, int]

_COORDINATOR_NOT_READY = (
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
)


def commit_group(
    bootstrap: str, group: str, offsets: dict[TP, int], client: dict[str, str] | None = None
) -> None:
    """Commit offsets as a consumer of `group` that stopped there would (`client`: settings
    such as SASL's).

    A consumer, not the admin API: Kafka 4.1 does not list a group whose offsets only the
    admin API wrote, and replicators (MM2 and ferry alike) find groups by listing them.
    """
    consumer = Consumer(
        {
            **(client or {}),
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    partitions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                consumer.commit(offsets=partitions, asynchronous=False)
                return
            except KafkaException as exc:
                # A cluster's first group: its coordinator may still be loading.
                loading = exc.args[0].code() in _COORDINATOR_NOT_READY
                if not loading or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def committed_offsets(
    bootstrap: str, group: str, client: dict[str, str] | None = None
) -> dict[TP, int]:
    """What `group` committed on every topic of the cluster (`client`: settings such as SASL's),
    read as ferry reads it: never through the admin API, whose OffsetFetch can crash the
    process (`ferry.kafka.group_offsets`)."""
    cluster = ClusterConfig(alias="test", bootstrap_servers=bootstrap, common=client or {})
    return read_group_offsets(cluster, group, timeout=30)


def consume_origins(
    bootstrap: str, group: str, partitions: list[TP], timeout: float = 60.0
) -> dict[TP, list[int]]:
    """Read every partition as `group` from its committed offset to the end.

    Returns the origin offset (ferry.origin header) of each record read. A partition without
    a committed offset fails the test (auto.offset.reset=error): a failover must commit every
    partition it maps.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(t, p) for t, p in partitions])
    origins: dict[TP, list[int]] = {tp: [] for tp in partitions}
    at_end: set[TP] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"partitions not read to the end: {at_end}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(tp)
                continue
            headers = dict(msg.headers() or ())
            origins[tp].append(Origin.from_bytes(headers[ORIGIN_HEADER]).offset)
    finally:
        consumer.close()
    return origins


def origin_at(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """The origin offset of the record at `offset` of a copied partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-origin-at"})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                return Origin.from_bytes(dict(msg.headers() or ())[ORIGIN_HEADER]).offset
        raise AssertionError(f"no record at {topic} partition {partition} offset {offset}")
    finally:
        consumer.close()
