"""Timestamp-based offset translation, for groups whose offsets ferry cannot translate exactly.

The role of Confluent Replicator's consumer-timestamps interceptor. An application on cluster
A commits through `ConsumerTimestampsRecorder`, which also writes, per partition, the
timestamp of the last record the group consumed. `TimestampMirror` copies those records to
cluster B. After losing A, `read_group_timestamps` on B gives the group's positions and
`offsets_for_timestamps` on B turns their timestamps into offsets in B's copies of the topics.
Exact translation (offset syncs) is preferred: this one re-delivers records and trusts
timestamps never to go backwards within a partition (see `offsets_for_timestamps`).

Records on `__consumer_timestamps` (compacted, one partition), UTF-8 JSON, compact separators:

    key   = ["<group>", "<topic>", <partition>]       e.g. ["billing","orders",3]
    value = {"offset": <n>, "timestamp": <ms>}        e.g. {"offset":1042,"timestamp":1700000000123}

`offset` is the offset the group committed (the next one it will read) and `timestamp` the
timestamp of the record before it, the last one the group consumed. Keys are deterministic,
so compaction keeps the latest position per group and partition; a null value forgets one.

Imports no PySpark: applications use this module as a small client library.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ferry.errors import FerryError
from ferry.kafka import clients

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

CONSUMER_TIMESTAMPS_TOPIC = "__consumer_timestamps"

Key = tuple[str, int]  # (topic, partition)
T = TypeVar("T")


@dataclass(frozen=True)
class TimestampPosition:
    """After a commit: the committed next offset, and the timestamp (ms) of the record before it."""

    offset: int
    timestamp: int

    def __post_init__(self) -> None:
        for name in ("offset", "timestamp"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


# --- record format ---------------------------------------------------------------------------


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode(group: str, topic: str, partition: int, pos: TimestampPosition) -> tuple[bytes, bytes]:
    """The (key, value) of the record saying `group` is at `pos` in `topic` `partition`."""
    if type(partition) is not int or partition < 0:
        raise ValueError(f"partition must be a non-negative integer, got {partition!r}")
    return (
        _json([group, topic, partition]),
        _json({"offset": pos.offset, "timestamp": pos.timestamp}),
    )


def _parse(data: bytes | None, what: str) -> Any:
    if data is None:
        raise ValueError(f"{what} is null")
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        raise ValueError(f"{what} is not UTF-8 JSON: {data[:100]!r}") from None


def decode_key(key: bytes | None) -> tuple[str, str, int]:
    """(group, topic, partition) of a record key; ValueError if it is not one."""
    parsed = _parse(key, "consumer timestamps key")
    ok = (
        isinstance(parsed, list)
        and len(parsed) == 3
        and isinstance(parsed[0], str)
        and isinstance(parsed[1], str)
        and type(parsed[2]) is int
        and parsed[2] >= 0
    )
    if not ok:
        raise ValueError(
            f'consumer timestamps key is not ["<group>", "<topic>", <partition>]: {key!r}'
        )
    return parsed[0], parsed[1], parsed[2]


def decode(key: bytes | None, value: bytes | None) -> tuple[str, str, int, TimestampPosition]:
    """(group, topic, partition, position) of a record; ValueError if it is not one."""
    group, topic, partition = decode_key(key)
    parsed = _parse(value, f"consumer timestamps value of {key!r}")
    if not isinstance(parsed, dict) or "offset" not in parsed or "timestamp" not in parsed:
        raise ValueError(
            f'consumer timestamps value is not {{"offset": n, "timestamp": ms}}: {value!r}'
        )
    try:
        pos = TimestampPosition(parsed["offset"], parsed["timestamp"])
    except ValueError as exc:
        raise ValueError(f"consumer timestamps value {value!r}: {exc}") from None
    return group, topic, partition, pos


def consumed_positions(messages: Iterable[Message]) -> dict[Key, TimestampPosition]:
    """Per partition: the offset after the last consumed record, and that record's timestamp.

    Messages carrying an error (end of partition, ...) are skipped. A record without a
    timestamp (pre-0.10 format) gives no position: a missing one only means more re-delivery.
    """
    last: dict[Key, tuple[int, int]] = {}
    for msg in messages:
        if msg.error() is not None:
            continue
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None and partition is not None and offset is not None
        key = (topic, partition)
        if key not in last or offset > last[key][0]:
            last[key] = (offset, msg.timestamp()[1])
    return {k: TimestampPosition(o + 1, ts) for k, (o, ts) in last.items() if ts >= 0}


# --- client plumbing ------------------------------------------------------------------------

# Errors that mean "no answer yet": retried until the deadline, then a TimeoutError.
_TRANSIENT = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
    }
)


def _error_of(exc: KafkaException) -> KafkaError | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


class _Deadline:
    """One timeout for a whole operation, and the TimeoutError saying what did not finish."""

    def __init__(self, timeout: float, what: str) -> None:
        self.timeout = timeout
        self.what = what
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self, detail: str = "") -> TimeoutError:
        suffix = f" (last error: {detail})" if detail else ""
        return TimeoutError(f"{self.what}: no answer within {self.timeout}s{suffix}")

    def retry(self, call: Callable[[float], T]) -> T:
        """`call(seconds_left)`, retried on transient errors; TimeoutError at the deadline."""
        detail = ""
        while self.left() > 0:
            try:
                return call(max(self.left(), 0.001))
            except KafkaException as exc:
                error = _error_of(exc)
                if error is None or error.code() not in _TRANSIENT:
                    raise
                detail = error.str()
            time.sleep(min(0.1, self.left()))  # backoff before asking again
        raise self.expired(detail)


def _bootstrap(config: Mapping[str, Any]) -> str:
    return str(config.get("bootstrap.servers", "?"))


def _reader(config: Mapping[str, Any]) -> Consumer:
    return clients.consumer(
        {
            **config,
            "group.id": f"ferry-timestamps-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        }
    )


def _producer(config: Mapping[str, Any]) -> Producer:
    # No auto-creation: a topic deleted under us would come back uncompacted, and grow forever.
    settings = {"enable.idempotence": True, "acks": "all", "allow.auto.create.topics": False}
    return clients.producer({**config, **settings})


def _bounds(consumer: Consumer, topic: str, deadline: _Deadline) -> dict[int, tuple[int, int]]:
    """Low and high watermark of each partition of `topic`; {} if it does not exist."""

    def metadata(left: float) -> Any:
        md = consumer.list_topics(topic, timeout=left).topics.get(topic)
        if md is not None and md.error is not None:
            if md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise KafkaException(md.error)  # retried if transient (e.g. just created)
        return md

    md = deadline.retry(metadata)
    if md is None:
        return {}
    return {p: _watermarks(consumer, topic, p, deadline) for p in md.partitions}


def _watermarks(
    consumer: Consumer, topic: str, partition: int, deadline: _Deadline
) -> tuple[int, int]:
    def call(left: float) -> tuple[int, int]:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), left)
        return int(low), int(high)

    return deadline.retry(call)


def _read(
    consumer: Consumer,
    topic: str,
    start: dict[int, int],
    end: dict[int, int],
    deadline: _Deadline,
) -> Iterator[Message]:
    """The records of `topic` from `start` up to `end` (exclusive), in order per partition.

    Stops at `end` even if more arrived since, so a caller can resume exactly there. Compacted
    gaps just before `end` are covered by the end-of-partition event."""
    pending = {p for p in end if end[p] > start.get(p, 0)}
    if not pending:
        return
    consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in pending])
    detail = ""
    try:
        while pending:
            if deadline.left() <= 0:
                raise deadline.expired(detail)
            for msg in consumer.consume(500, min(deadline.left(), 0.5)):
                error, p = msg.error(), msg.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(p)  # at the current end, which is at or past `end`
                    elif error.code() in _TRANSIENT and not error.fatal():
                        detail = error.str()  # the client retries by itself
                    else:
                        raise KafkaException(error)
                    continue
                offset = msg.offset()
                assert p is not None and offset is not None
                if p in pending and offset < end[p]:
                    yield msg
                if offset + 1 >= end[p]:
                    pending.discard(p)
    finally:
        consumer.unassign()


def _ensure_topic(
    admin: AdminClient, topic: str, replication_factor: int | None, deadline: _Deadline
) -> None:
    """Create `topic` (compacted, one partition) unless it exists."""
    md = deadline.retry(lambda left: admin.list_topics(timeout=left))
    if topic in md.topics:
        return
    factor = replication_factor or min(3, len(md.brokers))
    new = NewTopic(
        topic, num_partitions=1, replication_factor=factor, config={"cleanup.policy": "compact"}
    )
    try:
        admin.create_topics([new])[topic].result(deadline.left())
    except KafkaException as exc:
        error = _error_of(exc)
        if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise  # created meanwhile by another client is fine
    except TimeoutError:  # a future's result() times out like concurrent.futures
        raise deadline.expired("creating the topic") from None


def _flush(producer: Producer, topic: str, failures: list[str], deadline: _Deadline) -> None:
    remaining = producer.flush(deadline.left())
    if failures:
        raise FerryError(f"could not write to {topic}: {failures[0]}")
    if remaining:
        raise deadline.expired(f"{remaining} records to {topic} not acknowledged")


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
        self._bootstrap = _bootstrap(config)
        self._producer = producer if producer is not None else _producer(config)
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
        deadline = _Deadline(
            self.timeout, f"recording timestamps in {self.topic} on {self._bootstrap}"
        )
        if not self._topic_ready:
            _ensure_topic(self._admin, self.topic, self.replication_factor, deadline)
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
        _flush(self._producer, self.topic, failures, deadline)
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
    where = f"{topic} on {_bootstrap(config)}"
    deadline = _Deadline(timeout, f"reading {where}")
    consumer = _reader(config)
    try:
        bounds = _bounds(consumer, topic, deadline)
        start = {p: low for p, (low, _) in bounds.items()}
        end = {p: high for p, (_, high) in bounds.items()}
        latest: dict[Key, TimestampPosition] = {}
        for msg in _read(consumer, topic, start, end, deadline):
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
    bootstrap = _bootstrap(config)
    deadline = _Deadline(timeout, f"looking up offsets by timestamp on {bootstrap}")
    consumer = _reader(config)
    try:
        md = deadline.retry(lambda left: consumer.list_topics(timeout=left))
        for topic, partition in wanted:
            topic_md = md.topics.get(topic)
            if topic_md is None or partition not in topic_md.partitions:
                raise ValueError(f"{bootstrap} has no topic {topic} partition {partition}")
        # Ends are read before the lookup: a record stamped >= the wanted time that arrives
        # between the two would otherwise lie below an end read after, and be skipped.
        ends = {(t, p): _watermarks(consumer, t, p, deadline)[1] for t, p in wanted}
        query = [TopicPartition(t, p, ts) for (t, p), ts in wanted.items()]
        found = deadline.retry(lambda left: consumer.offsets_for_times(query, timeout=left))
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
            f"{source_topic} on {_bootstrap(source_config)} to {target_topic} on "
            f"{_bootstrap(target_config)}"
        )
        self._consumer = _reader(source_config)
        self._producer = _producer(target_config)
        self._admin = clients.admin_client(target_config)
        self._position: dict[int, int] = {}
        self._target_ready = False

    def sync(self, timeout: float = 10.0) -> int:
        """Copy what was added since the last call, up to the end at this call; the count."""
        deadline = _Deadline(timeout, f"copying {self._where}")
        bounds = _bounds(self._consumer, self.source_topic, deadline)
        if not bounds:
            return 0
        if not self._target_ready:
            _ensure_topic(self._admin, self.target_topic, self.replication_factor, deadline)
            self._target_ready = True
        start = {p: max(self._position.get(p, low), low) for p, (low, _) in bounds.items()}
        end = {p: high for p, (_, high) in bounds.items()}
        failures: list[str] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                failures.append(err.str())

        copied = 0
        for msg in _read(self._consumer, self.source_topic, start, end, deadline):
            self._produce(msg, on_delivery, deadline)
            copied += 1
        _flush(self._producer, self.target_topic, failures, deadline)
        # Advanced only once flushed: after a failure the next call copies the records again.
        self._position.update(end)
        return copied

    def _produce(self, msg: Message, on_delivery: Any, deadline: _Deadline) -> None:
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
