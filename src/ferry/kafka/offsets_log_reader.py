"""Each consumer group's partitions with an offset on a cluster, read from its
`__consumer_offsets` topic (offsets_log.py says what its records hold and why ferry reads
them).

`refresh()` reads from where the last refresh stopped to the ends the partitions had when it
began, so an index kept across a checkpoint sync's passes reads only what was written since.
Transactional offset commits not decided yet are counted (read_uncommitted): a partition too
many only makes a read ask one partition more.

Whatever goes wrong (no ACL to read the topic, a log larger than `max_records`, the cluster
not answering in time, a record that is not what Kafka writes) leaves the index unusable, with
the reason in `unusable`, until a later refresh reads it whole; `partitions_of` then answers
None, and the caller asks every partition as it would without the index. The index narrows
reads, never decides a result.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.config.model import ClusterConfig
from ferry.kafka import clients
from ferry.kafka.offsets_log import CommittedPartitions, OffsetsLogFormatError

__all__ = ["MAX_RECORDS", "OFFSETS_TOPIC", "OffsetsLogIndex"]

OFFSETS_TOPIC = "__consumer_offsets"
# More records than this to read and the index is not worth it: reading them would cost more
# than asking each group for every partition (a log this large is rare: it is compacted).
MAX_RECORDS = 5_000_000
TP = tuple[str, int]


class _TooLarge(Exception):
    """More records to read than the index is worth."""


class OffsetsLogIndex:
    """Each group's partitions with an offset on `cluster`, as of the last `refresh()`."""

    def __init__(
        self, cluster: ClusterConfig, *, timeout: float = 30.0, max_records: int = MAX_RECORDS
    ) -> None:
        self.cluster = cluster
        self._timeout = timeout
        self._max_records = max_records
        self._folded = CommittedPartitions()
        self._next: dict[int, int] = {}  # partition: the next offset to read
        self._consumer: Any = None
        self.unusable: str | None = "not read yet"

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def partitions_of(self, group: str) -> frozenset[TP] | None:
        """`group`'s partitions with an offset; None when the index cannot say (unusable, or
        no record names the group)."""
        return None if self.unusable is not None else self._folded.of(group)

    def refresh(self) -> bool:
        """Reads what was written since the last refresh; True when the index is usable. A
        read that fails leaves it unusable and empty: the next refresh reads from the start."""
        try:
            self._read_to_ends()
        except (KafkaException, OffsetsLogFormatError, TimeoutError, _TooLarge) as exc:
            self.unusable = f"{OFFSETS_TOPIC} on cluster {self.cluster.alias}: {exc}"
            self._folded, self._next = CommittedPartitions(), {}
            self.close()
            return False
        self.unusable = None
        return True

    def _client(self) -> Any:
        if self._consumer is None:
            self._consumer = clients.consumer(
                {
                    **self.cluster.consumer_config(),
                    "group.id": f"ferry-offsets-index-{uuid.uuid4().hex[:8]}",  # never joined
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    "isolation.level": "read_uncommitted",
                    "auto.offset.reset": "earliest",
                }
            )
        return self._consumer

    def _read_to_ends(self) -> None:
        deadline = time.monotonic() + self._timeout
        consumer = self._client()
        metadata = consumer.list_topics(OFFSETS_TOPIC, timeout=self._timeout).topics[OFFSETS_TOPIC]
        if metadata.error is not None:
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return  # no group ever committed on this cluster
            raise KafkaException(metadata.error)
        ends: dict[int, int] = {}
        to_read = 0
        for p in sorted(metadata.partitions):
            left = max(0.1, deadline - time.monotonic())
            low, high = consumer.get_watermark_offsets(
                TopicPartition(OFFSETS_TOPIC, p), timeout=left
            )
            start = max(low, self._next.get(p, low))
            self._next[p] = start
            if high > start:
                ends[p] = high
                to_read += high - start
        if to_read > self._max_records:
            raise _TooLarge(
                f"{to_read} records to read, more than the {self._max_records} worth reading"
            )
        if not ends:
            return
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, self._next[p]) for p in sorted(ends)])
        try:
            while ends:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"not read to its end in {self._timeout:.0f} s "
                        f"({len(ends)} partition(s) left)"
                    )
                for msg in consumer.consume(10_000, timeout=0.5):
                    self._take(msg, ends)
        finally:
            consumer.unassign()

    def _take(self, msg: Any, ends: dict[int, int]) -> None:
        p = msg.partition()
        error = msg.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                raise KafkaException(error)
            at = msg.offset()  # the end it reached: past any transaction markers
        else:
            if p in ends:
                self._folded.apply(msg.key(), msg.value() is not None)
            at = msg.offset() + 1
        if p in ends:
            self._next[p] = max(self._next[p], at)
            if self._next[p] >= ends[p]:
                del ends[p]
