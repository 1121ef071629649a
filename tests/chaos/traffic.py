"""A steady producer into the source, recording every record the source acknowledged."""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from ferry.kafka.log import quiet

__all__ = ["SteadyProducer", "digest"]


def digest(key: bytes | None, value: bytes | None) -> int:
    """What the audit compares between a source record and its copy."""
    return zlib.crc32(value or b"", zlib.crc32(key or b""))


@dataclass
class SteadyProducer:
    """`rate` records a second, round-robin over the partitions, acks=all, idempotent.

    A long message timeout rides out a source broker that is down for a while: the records
    wait in librdkafka's queue instead of failing. Records that fail anyway are counted, not
    expected (the source may or may not hold them; the audit reads what it holds).
    """

    bootstrap: str
    topic: str
    partitions: int
    rate: float
    value_bytes: int = 200
    acked: int = 0
    failed: int = 0
    sent: int = 0
    ack_times: dict[tuple[int, int], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> SteadyProducer:
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 180.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        self.acked += 1
        self.ack_times[(msg.partition(), msg.offset())] = time.time()

    def _run(self) -> None:
        producer = Producer(
            quiet(
                {
                    "bootstrap.servers": self.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 600_000,
                    "on_delivery": self._on_delivery,
                }
            )
        )
        padding = b"." * max(0, self.value_bytes - 16)
        began = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - began) * self.rate) - self.sent
            for _ in range(max(0, due)):
                seq = self.sent
                try:
                    producer.produce(
                        self.topic,
                        value=b"%015d|" % seq + padding,
                        key=b"%d" % seq,
                        partition=seq % self.partitions,
                    )
                except BufferError:
                    break  # the source is away and the queue is full: try again next tick
                self.sent += 1
            producer.poll(0.01)
        deadline = time.monotonic() + 170
        while producer.flush(1.0) > 0 and time.monotonic() < deadline:
            pass
