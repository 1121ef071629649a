"""Which target offset each copy got: delivery reports paired with source offsets.

Pure code (no clients): the copy loop hands these callbacks to `produce`, librdkafka calls
them from `poll`/`flush`. An idempotent producer delivers each partition in order, so reports
pair with source offsets by position. Two ways to pair them, per target partition:

- **Per record**: every copy carries a callback. Exact whatever else writes into the target
  partition, but a report costs about 2 us of Python per record (a Message object with a copy
  of the key and value, a call, a queue). Used where others may write too: a remote topic
  named like its source topic (the identity policy), where the target's own producers write;
  and in exactly-once leases, whose commit markers land among the next slice's copies.
- **Per chunk**: the copies of one partition from one fetched batch form a chunk; only its
  first and last copy carry a callback. If they landed `n - 1` offsets apart for `n` copies,
  the copies took consecutive offsets, one each: nothing was interleaved (another producer)
  and nothing went missing (a copy refused or timed out in the middle takes no offset, which
  shortens the span). Any other span is a mismatch: the batch is not committed, it is copied
  again, and the partition is tracked per record from then on.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from confluent_kafka import KafkaError

from ferry.engine.latency import Histogram
from ferry.kafka.offset_runs import RunBuilder

__all__ = ["LATENCY_SAMPLE_MASK", "Chunk", "DeliveryTracker", "Mismatch"]

# Per record, the replication latency histogram times records whose source offset is a
# multiple of 16 (a sample: timing every record cost about a tenth of the copy loop). Per
# chunk, it times the chunk's first and last copy.
LATENCY_SAMPLE_MASK = 15

Key = tuple[str, int]  # target topic, partition
Mismatch = tuple[str, int, int, int, int, int]  # topic, partition, first upstream, n, first, last


class DeliveryTracker:
    """Pairs delivery reports with upstream offsets; one per cached producer."""

    def __init__(self) -> None:
        # Target partitions that showed a mismatch: tracked per record for good (this worker).
        self.per_record: set[Key] = set()
        self.reset()

    def reset(self) -> None:
        self.pending: dict[Key, deque[int]] = {}
        self.builders: dict[Key, RunBuilder] = {}
        self.sources: dict[Key, str] = {}
        self.latency: dict[Key, Histogram] = {}
        self.errors: list[tuple[str, int, int, KafkaError]] = []
        self.mismatches: list[Mismatch] = []

    def expect(self, remote_topic: str, partition: int, source_topic: str) -> deque[int]:
        key = (remote_topic, partition)
        self.builders[key] = RunBuilder()
        self.sources[key] = source_topic
        self.latency[key] = Histogram()
        queue: deque[int] = deque()
        self.pending[key] = queue
        return queue

    def track_per_record(self, keys: list[Key]) -> None:
        """Track copies into these target partitions per record from now on (this worker):
        where ferry's own transaction markers land between a chunk's copies (an exactly-once
        lease commits one slice while the next one copies), a chunk's span says nothing."""
        self.per_record.update(keys)

    def chunked(self, remote_topic: str, partition: int, source_topic: str) -> bool:
        """Whether copies into this partition may be tracked per chunk."""
        return remote_topic != source_topic and (remote_topic, partition) not in self.per_record

    def chunk(self, remote_topic: str, partition: int) -> Chunk:
        return Chunk(self, (remote_topic, partition))

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        """Per record: the callback of every copy."""
        key = (msg.topic(), msg.partition())
        upstream = self.pending[key].popleft()
        if err is not None:
            self.errors.append((key[0], key[1], upstream, err))
        else:
            self.builders[key].add(upstream, msg.offset())
            if not upstream & LATENCY_SAMPLE_MASK:
                self._time(key, msg)

    def _time(self, key: Key, msg: Any) -> None:
        timestamp = msg.timestamp()[1]
        if timestamp > 0:
            self.latency[key].observe(time.time() * 1000 - timestamp)


class Chunk:
    """Consecutive copies into one target partition; callbacks on the first and the last.

    The copy loop appends each copy's upstream offset to `upstream` as it produces it, and
    gives `on_first` to the first copy, `on_last` to the last (`on_only` if it is both).
    """

    __slots__ = ("_first", "_key", "_tracker", "upstream")

    def __init__(self, tracker: DeliveryTracker, key: Key) -> None:
        self._tracker = tracker
        self._key = key
        self.upstream: list[int] = []
        self._first: int | None = None  # its target offset, once delivered

    def on_first(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self._tracker.errors.append((*self._key, self.upstream[0], err))
            return
        self._first = msg.offset()
        self._tracker._time(self._key, msg)

    def on_last(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self._tracker.errors.append((*self._key, self.upstream[-1], err))
            return
        if self._first is None:
            return  # the first copy failed: that error is reported
        self._tracker._time(self._key, msg)
        self._close(self._first, msg.offset())

    def on_only(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self._tracker.errors.append((*self._key, self.upstream[0], err))
            return
        self._tracker._time(self._key, msg)
        self._close(msg.offset(), msg.offset())

    def _close(self, first: int, last: int) -> None:
        upstream, count = self.upstream, len(self.upstream)
        if last - first + 1 != count:
            self._tracker.mismatches.append((*self._key, upstream[0], count, first, last))
            return
        builder = self._tracker.builders[self._key]
        if upstream[-1] - upstream[0] == count - 1:  # no gaps upstream either: one run
            builder.add_run(upstream[0], first, count)
            return
        for i, offset in enumerate(upstream):
            builder.add(offset, first + i)
