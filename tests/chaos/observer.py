"""Watching the target while faults happen, and reading both sides whole at the end."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ferry.kafka.log import quiet
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from tests.chaos.audit import Record
from tests.chaos.traffic import digest

__all__ = ["LagMonitor", "read_copies", "read_source"]


def _consumer(bootstrap: str, **settings: Any) -> Any:
    return Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"chaos-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                **settings,
            }
        )
    )


def _origin(msg: Any) -> int:
    for name, data in msg.headers() or ():
        if name == ORIGIN_HEADER:
            return Origin.from_bytes(data).offset
    raise AssertionError(f"a copy without {ORIGIN_HEADER} at offset {msg.offset()}")


def _read_whole(
    bootstrap: str, topic: str, partitions: int, identify: Callable[[Any], int], **settings: Any
) -> dict[int, list[Record]]:
    """Every partition from its start to the end it has when the read reaches it."""
    consumer = _consumer(bootstrap, **settings)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    ended: set[int] = set()
    deadline = time.monotonic() + 300
    try:
        while len(ended) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} on {bootstrap} did not reach its end")
            for msg in consumer.consume(5000, 1.0):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        ended.add(msg.partition())
                        continue
                    raise KafkaException(error)
                out[msg.partition()].append((identify(msg), digest(msg.key(), msg.value())))
    finally:
        consumer.close()
    return out


def read_source(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    return _read_whole(bootstrap, topic, partitions, lambda m: int(m.offset()))


def read_copies(
    bootstrap: str, topic: str, partitions: int, *, committed: bool = True
) -> dict[int, list[Record]]:
    isolation = "read_committed" if committed else "read_uncommitted"
    return _read_whole(bootstrap, topic, partitions, _origin, **{"isolation.level": isolation})


@dataclass
class LagMonitor:
    """Tails the remote topic read_committed: how far each partition got, the worst lag seen.

    Lag of a copy: when it became visible here minus its source timestamp (the producer's
    create time, which the copy keeps).
    """

    bootstrap: str
    topic: str
    partitions: int
    seen: int = 0
    max_lag_seconds: float = 0.0
    next_origin: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> LagMonitor:
        self._thread = threading.Thread(target=self._run, name="lag-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def reached(self, ends: dict[int, int]) -> bool:
        return all(self.next_origin.get(p, 0) >= end for p, end in ends.items())

    def _run(self) -> None:
        consumer = _consumer(self.bootstrap, **{"isolation.level": "read_committed"})
        try:
            while not self._stop.is_set():
                meta = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
                if meta is not None and meta.error is None and len(meta.partitions) > 0:
                    break
                self._stop.wait(0.5)
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self._stop.is_set():
                for msg in consumer.consume(1000, 0.2):
                    if msg.error() is not None:
                        continue  # end of partition, or a broker away: librdkafka retries
                    now = time.time()
                    origin = _origin(msg)
                    p = msg.partition()
                    self.next_origin[p] = max(self.next_origin.get(p, 0), origin + 1)
                    self.seen += 1
                    lag = now - msg.timestamp()[1] / 1000
                    self.max_lag_seconds = max(self.max_lag_seconds, lag)
        finally:
            consumer.close()
