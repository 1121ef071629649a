"""Reading ferry's and MM2's bookkeeping topics (offset runs, checkpoints) to their end.

Each read goes from where the previous one stopped to the end the partition had when the read
began, so an emitter that ticks every minute reads only what was written since.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from ferry.config.model import ClusterConfig
from ferry.kafka import clients
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, kafka_errors, unavailable

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = ["TopicTail"]


class TopicTail:
    """Follows one partition of a topic; `read_new()` returns the records written since."""

    def __init__(
        self, cluster: ClusterConfig, topic: str, partition: int = 0, *, timeout: float = 15.0
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self._timeout = timeout
        self._next = OFFSET_BEGINNING
        self._consumer: Consumer | None = None

    def _client(self) -> Any:
        # Any, not Consumer: the stubs make a consumed Message's offset() int | None, which
        # _read compares as the int it always is there.
        if self._consumer is None:
            settings = {
                **self.cluster.consumer_config(),
                "group.id": f"ferry-reader-{uuid.uuid4().hex[:8]}",
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 50,
            }
            self._consumer = clients.consumer(settings)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def exists(self) -> bool:
        with kafka_errors(self.cluster, f"read the metadata of {self.topic}"):
            topics = self._client().list_topics(self.topic, timeout=self._timeout).topics
        meta = topics.get(self.topic)
        return meta is not None and meta.error is None and self.partition in meta.partitions

    def read_new(self) -> list[tuple[bytes | None, bytes | None]]:
        """Records after the last read, up to the end as of now; [] if the topic is absent."""
        return self._read(None)

    def read_last(self, count: int) -> list[tuple[bytes | None, bytes | None]]:
        """The last `count` offsets' records (fewer where compaction left gaps)."""
        return self._read(count)

    def _read(self, last: int | None) -> list[tuple[bytes | None, bytes | None]]:
        if not self.exists():
            return []
        consumer = self._client()
        tp = TopicPartition(self.topic, self.partition)
        with kafka_errors(
            self.cluster, f"read the ends of {self.topic} partition {self.partition}"
        ):
            low, high = consumer.get_watermark_offsets(tp, timeout=self._timeout)
        if last is not None:
            self._next = max(low, high - last)
        if self._next != OFFSET_BEGINNING and self._next >= high:
            return []
        consumer.assign([TopicPartition(self.topic, self.partition, self._next)])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + self._timeout
        try:
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= high:
                            self._next = max(self._next, msg.offset())
                            return records
                        continue
                    if error.code() in UNREACHABLE_CODES:
                        raise unavailable(self.cluster, KafkaException(error))
                    raise KafkaException(error)
                records.append((msg.key(), msg.value()))
                self._next = msg.offset() + 1
                if self._next >= high:
                    return records
        finally:
            consumer.unassign()
        raise unavailable(
            self.cluster,
            TimeoutError(
                f"reading {self.topic} took longer than {self._timeout:.0f}s "
                f"(at offset {self._next} of {high})"
            ),
        )


def is_unreachable(exc: BaseException) -> bool:
    error = kafka_error_of(exc)
    return error is None or error.code() in UNREACHABLE_CODES
