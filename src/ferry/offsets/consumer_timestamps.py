"""Timestamp-based offset translation, for groups whose offsets ferry cannot translate exactly.

The role of Confluent Replicator's consumer-timestamps interceptor. An application on cluster
A commits through `ConsumerTimestampsRecorder`, which also writes, per partition, the
timestamp of the last record the group consumed. `TimestampMirror` copies those records to
cluster B. After losing A, `read_group_timestamps` on B gives the group's positions and
`offsets_for_timestamps` on B turns their timestamps into offsets in B's copies of the topics.
Exact translation (offset syncs) is preferred: this one re-delivers records and trusts
timestamps never to go backwards within a partition (see `offsets_for_timestamps`).

The record format lives in `timestamp_records` (pure), the clients' plumbing (deadlines,
reading to an end, creating the topic) in `timestamp_clients`.

Imports no PySpark: applications use this module as a small client library.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, batches
from ferry.offsets.timestamp_clients import (
    Deadline,
    bootstrap_of,
    ensure_topic,
    flush,
    partition_bounds,
    read_records,
    reader,
    timestamps_producer,
    watermarks,
)
from ferry.offsets.timestamp_records import (
    CONSUMER_TIMESTAMPS_TOPIC,
    Key,
    TimestampPosition,
    consumed_positions,
    decode,
    decode_key,
    encode,
)

__all__ = [
    "CONSUMER_TIMESTAMPS_TOPIC",
    "ConsumerTimestampsRecorder",
    "TimestampMirror",
    "TimestampPosition",
    "consumed_positions",
    "decode",
    "decode_key",
    "encode",
    "offsets_for_timestamps",
    "read_group_timestamps",
]


# --- recording ------------------------------------------------------------------------------


class ConsumerTimestampsRecorder:
    """Commits a consumer's offsets, then records the consumed timestamps beside them.

    `config` reaches the cluster the consumer reads (bootstrap.servers and security). The
    timestamps are written only after the commit succeeded: a timestamp ahead of the commit
    would make a failed-over consumer skip records; one behind it only re-delivers them.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        group: str,
        topic: str = CONSUMER_TIMESTAMPS_TOPIC,
        replication_factor: int | None = None,
        timeout: float = 10.0,
        producer: Any = None,  # for tests
        admin: Any = None,  # for tests
    ) -> None:
        self.group = group
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout = timeout
        self._bootstrap = bootstrap_of(config)
        self._producer = producer if producer is not None else timestamps_producer(config)
        self._admin = admin if admin is not None else clients.admin_client(config)
        self._topic_ready = False

    def commit(self, consumer: Any, messages: Iterable[Message]) -> dict[Key, TimestampPosition]:
        """Commit after `messages` synchronously, then record and flush their timestamps.

        Returns the positions recorded. Raises KafkaException if the commit failed (nothing
        is recorded), TimeoutError or FerryError if the timestamps were not written.
        """
        positions = consumed_positions(messages)
        if not positions:
            return {}
        deadline = Deadline(
            self.timeout, f"recording timestamps in {self.topic} on {self._bootstrap}"
        )
        if not self._topic_ready:
            ensure_topic(self._admin, self.topic, self.replication_factor, deadline)
            self._topic_ready = True
        offsets = [TopicPartition(t, p, pos.offset) for (t, p), pos in positions.items()]
        for tp in consumer.commit(offsets=offsets, asynchronous=False) or []:
            if tp.error is not None:
                raise KafkaException(
                    KafkaError(
                        tp.error.code(),
                        f"commit of {tp.topic} [{tp.partition}] failed: {tp.error.str()}",
                    )
                )
        failures: list[str] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failures.append(err.str())

        for (topic, partition), pos in positions.items():
            key, value = encode(self.group, topic, partition, pos)
            self._producer.produce(self.topic, value=value, key=key, on_delivery=on_delivery)
        flush(self._producer, self.topic, failures, deadline)
        return positions

    def close(self) -> None:
        self._producer.flush(self.timeout)

    def __enter__(self) -> ConsumerTimestampsRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- reading and translating ----------------------------------------------------------------


def read_group_timestamps(
    config: Mapping[str, Any],
    group: str,
    *,
    topic: str = CONSUMER_TIMESTAMPS_TOPIC,
    timeout: float = 10.0,
) -> dict[Key, TimestampPosition]:
    """`group`'s latest position per (topic, partition) in the timestamps `topic`.

    Reads up to the end the topic had when called; {} if the topic does not exist. A record
    that is not in the format raises ValueError naming its offset.
    """
    where = f"{topic} on {bootstrap_of(config)}"
    deadline = Deadline(timeout, f"reading {where}")
    consumer = reader(config)
    try:
        bounds = partition_bounds(consumer, topic, deadline)
        start = {p: low for p, (low, _) in bounds.items()}
        end = {p: high for p, (_, high) in bounds.items()}
        latest: dict[Key, TimestampPosition] = {}
        for msg in read_records(consumer, topic, start, end, deadline):
            try:
                if msg.value() is None:  # tombstone: the position was deleted
                    g, t, p = decode_key(msg.key())
                    if g == group:
                        latest.pop((t, p), None)
                    continue
                g, t, p, pos = decode(msg.key(), msg.value())
            except ValueError as exc:
                raise ValueError(
                    f"{where}, partition {msg.partition()}, offset {msg.offset()}: {exc}"
                ) from None
            if g == group:
                latest[(t, p)] = pos
        return latest
    finally:
        consumer.close()


def _offsets_for_times(consumer: Any, query: list[TopicPartition], left: float) -> Any:
    return consumer.offsets_for_times(query, timeout=left)


def offsets_for_timestamps(
    config: Mapping[str, Any], wanted: Mapping[Key, int], *, timeout: float = 10.0
) -> dict[Key, int]:
    """Per (topic, partition) of the cluster `config` reaches: the offset of the first record
    whose timestamp is >= the wanted one, or the partition's end if there is none.

    Why >= and not >: several records can share the last consumed record's millisecond, and
    with > those after it would be skipped. The price is re-delivering the records with
    exactly that timestamp, at least the last consumed one.

    Assumes timestamps never decrease within a partition. CreateTime is set by producers and
    can go backwards; then an earlier-stamped record after the position is skipped (lost) and
    a later-stamped one before it re-delivered. This is why exact translation is preferred.
    """
    for (topic, partition), ts in wanted.items():
        if ts < 0:
            raise ValueError(f"timestamp for {topic} [{partition}] must be >= 0, got {ts}")
    bootstrap = bootstrap_of(config)
    deadline = Deadline(timeout, f"looking up offsets by timestamp on {bootstrap}")
    consumer = reader(config)
    try:
        md = deadline.retry(lambda left: consumer.list_topics(timeout=left))
        for topic, partition in wanted:
            topic_md = md.topics.get(topic)
            if topic_md is None or partition not in topic_md.partitions:
                raise ValueError(f"{bootstrap} has no topic {topic} partition {partition}")
        # Ends are read before the lookup: a record stamped >= the wanted time that arrives
        # between the two would otherwise lie below an end read after, and be skipped.
        ends = {(t, p): watermarks(consumer, t, p, deadline)[1] for t, p in wanted}
        query = [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()]
        found = [
            tp
            for batch in batches(query, MAX_OFFSETS_PARTITIONS_PER_REQUEST)
            for tp in deadline.retry(partial(_offsets_for_times, consumer, batch))
        ]
        result: dict[Key, int] = {}
        for tp in found:
            if tp.error is not None:
                raise KafkaException(
                    KafkaError(
                        tp.error.code(),
                        f"offset lookup of {tp.topic} [{tp.partition}] "
                        f"on {bootstrap} failed: {tp.error.str()}",
                    )
                )
            key = (tp.topic, tp.partition)
            result[key] = tp.offset if tp.offset >= 0 else ends[key]
        return result
    finally:
        consumer.close()


# --- mirroring ------------------------------------------------------------------------------


class TimestampMirror:
    """Copies the source's timestamps topic to `target_topic` on the target, unchanged.

    Its read position is kept in memory: a new mirror copies everything again, which
    compaction and the idempotent values make harmless.
    """

    def __init__(
        self,
        source_config: Mapping[str, Any],
        target_config: Mapping[str, Any],
        target_topic: str,
        *,
        replication_factor: int = 1,
        source_topic: str = CONSUMER_TIMESTAMPS_TOPIC,
    ) -> None:
        self.source_topic = source_topic
        self.target_topic = target_topic
        self.replication_factor = replication_factor
        self._where = (
            f"{source_topic} on {bootstrap_of(source_config)} to {target_topic} on "
            f"{bootstrap_of(target_config)}"
        )
        self._consumer = reader(source_config)
        self._producer = timestamps_producer(target_config)
        self._admin = clients.admin_client(target_config)
        self._position: dict[int, int] = {}
        self._target_ready = False

    def sync(self, timeout: float = 10.0) -> int:
        """Copy what was added since the last call, up to the end at this call; the count."""
        deadline = Deadline(timeout, f"copying {self._where}")
        bounds = partition_bounds(self._consumer, self.source_topic, deadline)
        if not bounds:
            return 0
        if not self._target_ready:
            ensure_topic(self._admin, self.target_topic, self.replication_factor, deadline)
            self._target_ready = True
        start = {p: max(self._position.get(p, low), low) for p, (low, _) in bounds.items()}
        end = {p: high for p, (_, high) in bounds.items()}
        failures: list[str] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failures.append(err.str())

        copied = 0
        for msg in read_records(self._consumer, self.source_topic, start, end, deadline):
            self._produce(msg, on_delivery, deadline)
            copied += 1
        flush(self._producer, self.target_topic, failures, deadline)
        # Advanced only once flushed: after a failure the next call copies the records again.
        self._position.update(end)
        return copied

    def _produce(self, msg: Message, on_delivery: Any, deadline: Deadline) -> None:
        timestamp = msg.timestamp()[1]
        while True:
            try:
                self._producer.produce(
                    self.target_topic,
                    value=msg.value(),
                    key=msg.key(),
                    headers=msg.headers(),
                    timestamp=max(timestamp, 0),
                    on_delivery=on_delivery,
                )
                self._producer.poll(0)
                return
            except BufferError:  # local queue full: wait for acknowledgements
                if deadline.left() <= 0:
                    raise deadline.expired("producer queue full") from None
                self._producer.poll(min(deadline.left(), 0.1))

    def close(self) -> None:
        self._consumer.close()
        self._producer.flush(10.0)
