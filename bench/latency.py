"""Replication latency at a fixed rate: target append time minus source timestamp, per record.

A producer writes `rate` records per second into a fresh source topic, each record's timestamp
(CreateTime, set explicitly) also written into the first 8 bytes of its value (big-endian
milliseconds since the epoch). The replicator's target topic is created beforehand with
`message.timestamp.type=LogAppendTime`, so the target broker stamps every copy with the time
it appended it. Both replicators leave that setting alone (it is in the default
`config.properties.exclude` of MM2 and of ferry) and the target topic is created the same way
for both. After the run the whole target topic is read back: latency = the copy's timestamp
(target append time) minus the source timestamp carried in its value. The source, target and
benchmark share one machine and so one clock.

That is when the target holds a copy, not when a consumer can read it. A transactional copy
(exactly-once) is appended before its transaction commits, and a `read_committed` consumer
(the only view an exactly-once consumer has) receives it only after the commit's markers. So
`CommittedReader` also measures latency as consumers see it: a `read_committed` consumer on the
target, assigned from the start and reading throughout the run; latency = the time it received
a copy minus the source timestamp in the value. Without transactions (at-least-once) a
`read_committed` consumer reads exactly what a `read_uncommitted` one does (the last stable
offset is the high watermark), so the same consumer serves both modes.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

from bench.harness import cleanup_topics, create_topic

WARM_UP_KEY = b"w"
TIMED_KEY = b"t"
_STAMP = struct.Struct(">q")


def stamped_value(template: bytes, timestamp_ms: int) -> bytes:
    return _STAMP.pack(timestamp_ms) + template[_STAMP.size :]


def stamp_of(value: bytes) -> int:
    return int(_STAMP.unpack_from(value)[0])


class PacedProducer:
    """Produces stamped records at a fixed rate (in 10 ms steps), acks=all, idempotent."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, values: list[bytes]) -> None:
        self.topic = topic
        self.partitions = partitions
        self.values = values
        self.failures: list[KafkaError] = []
        self.produced = 0
        self.bytes = 0
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "compression.type": "lz4",
                "on_delivery": self._on_delivery,
            }
        )

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.failures.append(err)

    def _one(self, prefix: bytes, index: int) -> None:
        now = int(time.time() * 1000)
        key = prefix + str(index).encode()
        value = stamped_value(self.values[self.produced % len(self.values)], now)
        self.producer.produce(
            self.topic, value, key, partition=self.produced % self.partitions, timestamp=now
        )
        self.produced += 1
        self.bytes += len(key) + len(value)

    def burst(self, prefix: bytes, count: int) -> None:
        for index in range(count):
            self._one(prefix, index)
        self.flush()

    def paced(self, prefix: bytes, rate: float, seconds: float) -> int:
        """`rate` records per second for `seconds`; returns how many were produced."""
        began = time.monotonic()
        sent = 0
        total = int(rate * seconds)
        first = self.produced  # keys stay unique across calls with the same prefix
        while sent < total:
            due = min(total, int((time.monotonic() - began) * rate) + 1)
            while sent < due:
                self._one(prefix, first + sent)
                sent += 1
            self.producer.poll(0)
            time.sleep(0.01)
        self.flush()
        return sent

    def flush(self) -> None:
        if self.producer.flush(60) > 0 or self.failures:
            raise RuntimeError(f"producing to {self.topic} failed: {self.failures[:1]}")


def _reader(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-latency-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )


def _ends(consumer: Consumer, topic: str) -> dict[int, int]:
    metadata = consumer.list_topics(topic, timeout=30).topics[topic]
    ends = {}
    for p in sorted(metadata.partitions):
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = high
    return ends


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark now: where records produced from now on will start."""
    consumer = _reader(bootstrap)
    try:
        return _ends(consumer, topic)
    finally:
        consumer.close()


def read_latencies(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout: float = 120.0,
    starts: Mapping[int, int] | None = None,
) -> list[float]:
    """Latency in ms of every timed record in `topic` (a LogAppendTime target topic), from
    the beginning or from the offsets in `starts` (partition -> offset) up to the end."""
    consumer = _reader(bootstrap)
    try:
        ends = _ends(consumer, topic)
        first = {p: (starts or {}).get(p, 0) for p in ends}
        open_partitions = {p for p in ends if ends[p] > first[p]}
        consumer.assign([TopicPartition(topic, p, first[p]) for p in sorted(open_partitions)])
        latencies: list[float] = []
        deadline = time.monotonic() + timeout
        while open_partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} back took over {timeout:.0f}s")
            for m in consumer.consume(num_messages=10_000, timeout=1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        open_partitions.discard(m.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {err}")
                partition, offset = m.partition(), m.offset()
                if partition is None or offset is None:
                    continue  # not a record (records always have both)
                if offset + 1 >= ends[partition]:
                    open_partitions.discard(partition)
                kind, timestamp = m.timestamp()
                if kind != TIMESTAMP_LOG_APPEND_TIME:
                    raise RuntimeError(f"{topic} is not LogAppendTime (timestamp type {kind})")
                key, value = m.key() or b"", m.value()
                if key.startswith(TIMED_KEY):
                    if value is None:
                        raise RuntimeError(f"{topic}: timed record {key!r} without a value")
                    latencies.append(float(timestamp - stamp_of(value)))
        if len(latencies) < expected:
            raise RuntimeError(f"{topic} holds {len(latencies)} timed records of {expected}")
        return latencies
    finally:
        consumer.close()


# The consumer's own longest wait for data on a fetch (librdkafka's default is 500 ms): the
# broker answers a fetch as soon as records become readable, and this bounds what the consumer
# adds should it not, so the figure is the replicator's.
CONSUMER_FETCH_WAIT_MS = 10
CONSUMER_SETTINGS = {
    "isolation.level": "read_committed",
    "fetch.wait.max.ms": str(CONSUMER_FETCH_WAIT_MS),
    "enable.auto.commit": "false",
    "enable.partition.eof": "false",
}


def consumer_latency(received_ms: float, value: bytes) -> float:
    """A copy's latency as a consumer sees it: receive time minus the source timestamp."""
    return received_ms - stamp_of(value)


class CommittedReader:
    """A `read_committed` consumer of a target topic on a thread of its own, for a whole run.

    `start()` assigns every partition from its beginning (create the target topic first);
    from then on each timed record's latency is its receive time (wall clock, right after the
    consume call returned it) minus its source timestamp. `stop()` ends the thread;
    `wait_for(count)` waits until that many timed records were received."""

    def __init__(
        self, bootstrap: str, topic: str, settings: Mapping[str, str] | None = None
    ) -> None:
        """`settings`: librdkafka settings beyond (or instead of) CONSUMER_SETTINGS."""
        self.topic = topic
        self.latencies: list[float] = []
        self.received = 0  # every record, warm-up ones too
        self.error: BaseException | None = None
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-committed-{uuid.uuid4().hex}",
                **CONSUMER_SETTINGS,
                **(settings or {}),
            }
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-committed", daemon=True)

    def start(self, timeout: float = 30.0) -> CommittedReader:
        """Assigns the topic's partitions, once the broker knows them all with a leader (a
        topic created just before may not be in its metadata yet), and starts reading."""
        deadline = time.monotonic() + timeout
        while True:
            metadata = self._consumer.list_topics(self.topic, timeout=10).topics[self.topic]
            if (
                metadata.error is None
                and metadata.partitions
                and all(p.leader >= 0 for p in metadata.partitions.values())
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.topic} is not there to read: {metadata.error}")
            time.sleep(0.1)
        self._consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in sorted(metadata.partitions)]
        )
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                # consume(n, timeout) returns only once n messages arrived or the whole timeout
                # passed, which would add up to that timeout to every receive time: poll()
                # returns on the first message, then what is fetched already is taken at once.
                first = self._consumer.poll(0.1)
                if first is None:
                    continue
                batch = [first, *self._consumer.consume(num_messages=10_000, timeout=0)]
                now_ms = time.time() * 1000
                for m in batch:
                    err = m.error()
                    if err is not None:
                        raise RuntimeError(f"reading {self.topic}: {err}")
                    self.received += 1
                    key, value = m.key() or b"", m.value()
                    if key.startswith(TIMED_KEY) and value is not None:
                        self.latencies.append(consumer_latency(now_ms, value))
        except BaseException as exc:  # handed to the caller by wait_for and stop
            self.error = exc

    def wait_for(self, timed: int, timeout: float) -> None:
        """Until `timed` timed records were received; TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while len(self.latencies) < timed:
            if self.error is not None:
                raise RuntimeError(f"the read_committed consumer failed: {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"a read_committed consumer of {self.topic} received "
                    f"{len(self.latencies)} of {timed} timed records in {timeout:.0f} s"
                )
            time.sleep(0.1)

    def close(self) -> None:
        """Ends the thread and the consumer (again: nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        self._consumer.close()

    def stop(self) -> list[float]:
        """Ends the consumer; the latencies of the timed records it received."""
        self.close()
        if self.error is not None:
            raise RuntimeError(f"the read_committed consumer failed: {self.error}")
        return self.latencies


# The brokers' JIT compiler: a broker new to a workload spends its first 30-40 s of it
# compiling (measured at 20,000 records/s: the two brokers' C2 threads took about half a core
# for 30 s, and the first replicator timed after the clusters started paid for it, p99 169 ms
# against 42 when the same replicator ran later in the sitting). `warm_brokers` drives the same
# paths first, timed for neither replicator.
BROKER_WARM_UP_SECONDS = 45.0


def warm_brokers(
    bootstraps: tuple[str, str],
    rate: float,
    seconds: float,
    partitions: int,
    values: list[bytes],
) -> None:
    """Copy `rate` records/s from a topic on A into a LogAppendTime topic on B for `seconds`,
    with a plain Python copier, a read_committed reader on B throughout: every path a timed
    run takes on both brokers (produce, fetch, append, read), none of it timed."""
    bootstrap_a, bootstrap_b = bootstraps
    source, target = f"bench-jit-{uuid.uuid4()}", f"bench-jit-copy-{uuid.uuid4()}"
    create_topic(bootstrap_a, source, partitions)
    create_topic(bootstrap_b, target, partitions, {"message.timestamp.type": "LogAppendTime"})
    reader = CommittedReader(bootstrap_b, target).start()
    done = threading.Event()
    copier = threading.Thread(
        target=_copy_until, args=(bootstrap_a, source, bootstrap_b, target, done), daemon=True
    )
    copier.start()
    try:
        PacedProducer(bootstrap_a, source, partitions, values).paced(WARM_UP_KEY, rate, seconds)
    finally:
        done.set()
        copier.join(60)
        reader.stop()
        reader.close()
        cleanup_topics(bootstrap_b, [target])
        cleanup_topics(bootstrap_a, [source])


def _copy_until(
    bootstrap_a: str, source: str, bootstrap_b: str, target: str, done: threading.Event
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_a,
            "group.id": f"bench-jit-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap_b, "linger.ms": 0, "compression.type": "lz4"}
    )
    try:
        consumer.subscribe([source])
        while not done.is_set():
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                partition = m.partition()
                if m.error() is None and partition is not None:
                    producer.produce(target, m.value(), m.key(), partition=partition)
            producer.poll(0)
        producer.flush(30)
    finally:
        consumer.close()
