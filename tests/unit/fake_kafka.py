"""In-memory stand-ins for the confluent-kafka Consumer and Producer that `copy_bin` uses.

Only the API subset the copy loop calls, with the behaviour it relies on:

- FakeConsumer reads per-partition logs that may have offset gaps (compaction, transaction
  markers, aborted records), a log start (retention) and an end past the last record. It
  emits a `_PARTITION_EOF` event (offset = end of log) once a partition's position reaches
  its end, and an `_AUTO_OFFSET_RESET` error when assigned below the log start (what
  `auto.offset.reset=error` does); `seek` clears it. OFFSET_BEGINNING (-2) starts at the
  log start. Partitions are fetched round-robin, a few messages per `consume` call.
- FakeProducer appends to in-memory target logs and queues delivery reports, which `poll`
  and `flush` hand to the tracker's `on_delivery` in produce order (so in order per
  partition, like an idempotent producer). It can refuse chosen records in their delivery
  report, raise KafkaException from `produce` for chosen records, or raise BufferError
  (queue full) on its first calls.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

Headers = list[tuple[str, bytes | None]]
TP = tuple[str, int]


@dataclass(frozen=True)
class Rec:
    """One record of a log: what a consumer sees and a producer writes."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None = None
    timestamp: int = 1_700_000_000_000


@dataclass
class Log:
    """A partition's log: records in offset order, possibly with gaps."""

    records: list[Rec]
    start: int | None = None  # log start offset (retention); default: first record, else 0
    end: int | None = None  # high watermark; default: one past the last record

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.records[0].offset if self.records else 0
        if self.end is None:
            self.end = self.records[-1].offset + 1 if self.records else self.start

    def low(self) -> int:
        assert self.start is not None
        return self.start

    def high(self) -> int:
        assert self.end is not None
        return self.end


def log_of(*offsets: int, value: Callable[[int], bytes] = lambda o: b"v%d" % o, **kw: Any) -> Log:
    """A log holding a record at each given offset, with key k<offset> and value v<offset>."""
    return Log([Rec(o, b"k%d" % o, value(o)) for o in offsets], **kw)


class FakeMessage:
    """The confluent_kafka.Message accessors the copier calls."""

    def __init__(
        self,
        topic: str | None,
        partition: int,
        offset: int,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        timestamp: int = -1,
        error: KafkaError | None = None,
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers
        self._timestamp, self._error = timestamp, error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        # confluent-kafka builds a new list on every call; the copier appends to it.
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)  # TIMESTAMP_CREATE_TIME

    def error(self) -> KafkaError | None:
        return self._error


@dataclass
class _Position:
    offset: int
    eof_sent: bool = False
    reset_error: bool = False  # assigned below the log start: report it once...
    waiting_for_seek: bool = False  # ...then fetch nothing until assigned afresh


@dataclass
class FakeConsumer:
    logs: dict[TP, Log]
    fetch_size: int = 4  # messages one consume() call returns at most
    # Error events emitted on every consume/poll call, as librdkafka reports e.g. _TRANSPORT.
    noise: Callable[[], FakeMessage | None] | None = None
    positions: dict[TP, _Position] = field(default_factory=dict)
    assigned_log: list[list[tuple[str, int, int]]] = field(default_factory=list)
    reassigned: list[tuple[str, int, int]] = field(default_factory=list)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self.assigned_log.append([(p.topic, p.partition, p.offset) for p in partitions])
        self.positions = {}
        for p in partitions:
            log = self.logs[(p.topic, p.partition)]
            if p.offset == OFFSET_BEGINNING:
                self.positions[(p.topic, p.partition)] = _Position(log.low())
            else:
                below = p.offset < log.low()
                self.positions[(p.topic, p.partition)] = _Position(p.offset, reset_error=below)

    def incremental_unassign(self, partitions: Iterable[TopicPartition]) -> None:
        for p in partitions:
            del self.positions[(p.topic, p.partition)]

    def unassign(self) -> None:
        self.positions = {}

    def incremental_assign(self, partitions: Iterable[TopicPartition]) -> None:
        for p in partitions:
            tp = (p.topic, p.partition)
            self.reassigned.append((*tp, p.offset))
            self.positions[tp] = _Position(p.offset, reset_error=p.offset < self.logs[tp].low())

    def seek(self, partition: TopicPartition) -> None:
        tp = (partition.topic, partition.partition)
        if self.positions[tp].waiting_for_seek:
            # As librdkafka: a partition whose fetcher stopped on an offset reset error.
            raise KafkaException(KafkaError(KafkaError._STATE, "Erroneous state"))
        self.positions[tp] = _Position(partition.offset)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        log = self.logs[(partition.topic, partition.partition)]
        return log.low(), log.high()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        out: list[FakeMessage] = []
        if self.noise is not None and (event := self.noise()) is not None:
            out.append(event)
        progressed = True
        while progressed and len(out) < min(num_messages, self.fetch_size):
            progressed = False
            for tp in list(self.positions):  # round-robin: one message per partition a round
                if len(out) >= min(num_messages, self.fetch_size):
                    break
                message = self._next(tp)
                if message is not None:
                    out.append(message)
                    progressed = True
        return out

    def poll(self, timeout: float | None = None) -> FakeMessage | None:
        messages = self.consume(1)
        if messages:
            return messages[0]
        time.sleep(min(timeout or 0.0, 0.02))
        return None

    def _next(self, tp: TP) -> FakeMessage | None:
        position = self.positions[tp]
        log = self.logs[tp]
        if position.waiting_for_seek:
            return None
        if position.reset_error:
            position.reset_error, position.waiting_for_seek = False, True
            return FakeMessage(
                *tp, position.offset, error=KafkaError(KafkaError._AUTO_OFFSET_RESET)
            )
        record = next((r for r in log.records if r.offset >= position.offset), None)
        if record is not None:
            position.offset = record.offset + 1
            return FakeMessage(
                *tp, record.offset, record.key, record.value, record.headers, record.timestamp
            )
        if position.eof_sent:
            return None
        position.offset = max(position.offset, log.high())
        position.eof_sent = True
        return FakeMessage(*tp, position.offset, error=KafkaError(KafkaError._PARTITION_EOF))


class FakeProducer:
    def __init__(
        self,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
        *,
        first_offset: int = 1000,
        refuse: dict[bytes, KafkaError] | None = None,
        raise_on_produce: dict[bytes, KafkaError] | None = None,
        buffer_errors: int = 0,
        unknown_partition_errors: int = 0,
        reports_per_call: int = 3,
        foreign_after: dict[bytes, int] | None = None,
    ) -> None:
        """`refuse` / `raise_on_produce` are keyed by record value; target offsets start at
        `first_offset` in every partition; `buffer_errors` produce calls raise BufferError."""
        self.on_delivery = on_delivery
        self.first_offset = first_offset
        self.refuse = refuse or {}
        self.raise_on_produce = raise_on_produce or {}
        self.buffer_errors = buffer_errors
        self.unknown_partition_errors = unknown_partition_errors  # metadata not caught up yet
        self.metadata_requests = 0
        self.reports_per_call = reports_per_call
        # value -> records another producer appends right after that record (interleaving)
        self.foreign_after = dict(foreign_after or {})
        # A target that takes no writes (below min.insync.replicas): copies are held, never
        # reported, until purged.
        self.down = False
        self.purges = 0
        self._held: list[tuple[Any, KafkaError | None, FakeMessage]] = []
        self.callbacks = 0  # produce calls that asked for a delivery report
        self.produce_calls = 0
        self.logs: dict[TP, list[Rec]] = {}
        self._next_offset: dict[TP, int] = {}
        self._reports: deque[tuple[Any, KafkaError | None, FakeMessage]] = deque()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.metadata_requests += 1

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Headers | None = None,
        on_delivery: Callable[[KafkaError | None, Any], None] | None = None,
    ) -> None:
        """Like confluent-kafka: `on_delivery` for this record, else the producer's default,
        else no report at all."""
        self.produce_calls += 1
        callback = on_delivery or self.on_delivery
        if self.buffer_errors > 0:
            self.buffer_errors -= 1
            raise BufferError("Local: Queue full")
        if self.unknown_partition_errors > 0:
            self.unknown_partition_errors -= 1
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        if value in self.raise_on_produce:
            raise KafkaException(self.raise_on_produce[value])
        tp = (topic, partition)
        self.callbacks += callback is not None
        if self.down:
            self._held.append((callback, None, FakeMessage(topic, partition, -1001, key, value)))
            return
        if value in self.refuse:
            report = FakeMessage(topic, partition, -1001, key, value, headers, timestamp)
            self._reports.append((callback, self.refuse[value], report))
            return
        offset = self._next_offset.get(tp, self.first_offset)
        self._next_offset[tp] = offset + 1
        copied = Rec(offset, key, value, list(headers) if headers is not None else None, timestamp)
        self.logs.setdefault(tp, []).append(copied)
        self._reports.append((callback, None, FakeMessage(topic, partition, offset, key, value)))
        if value in self.foreign_after:
            self.interleave(topic, partition, self.foreign_after.pop(value))

    def interleave(self, topic: str, partition: int, count: int = 1) -> None:
        """Another producer appends `count` records to the partition (offsets taken now)."""
        tp = (topic, partition)
        for _ in range(count):
            offset = self._next_offset.get(tp, self.first_offset)
            self._next_offset[tp] = offset + 1
            self.logs.setdefault(tp, []).append(Rec(offset, None, b"foreign", None, 0))

    def poll(self, timeout: float | None = None) -> int:
        return self._deliver(self.reports_per_call)

    def flush(self, timeout: float | None = None) -> int:
        self._deliver(self.reports_per_call)
        return len(self._reports) + len(self._held)

    def __len__(self) -> int:
        return len(self._reports) + len(self._held)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Like confluent-kafka's: every copy not acknowledged yet is reported failed."""
        self.purges += 1
        purged = KafkaError(KafkaError._PURGE_QUEUE)
        self._reports.extend((callback, purged, message) for callback, _, message in self._held)
        self._held.clear()

    def _deliver(self, limit: int) -> int:
        served = 0
        while self._reports and served < limit:
            callback, err, message = self._reports.popleft()
            if callback is not None:
                callback(err, message)
            served += 1
        return served


class TopicIdAdmin:
    """Stands in for the source's AdminClient where the planner asks for topic ids
    (`describe_topics`): every topic asked for is described, with the id `ids` gives it or a
    fixed one, at once; a planner given none makes a real client that waits out its timeout
    on an address that does not answer."""

    def __init__(self, ids: dict[str, str] | None = None) -> None:
        self.ids = ids or {}

    def describe_topics(self, topics: Any, request_timeout: float = 0) -> dict[str, Any]:
        from concurrent.futures import Future
        from types import SimpleNamespace

        described: dict[str, Any] = {}
        for name in topics.topic_names:
            future: Future[Any] = Future()
            topic_id = self.ids.get(name, f"id-of-{name}")
            future.set_result(SimpleNamespace(name=name, topic_id=topic_id))
            described[name] = future
        return described
