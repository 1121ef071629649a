"""The per-task copy loop: consume exact offset ranges, produce faithful copies, report runs.

No PySpark here: a Spark task calls `copy_bin` with clients cached in its Python worker.

What a copy keeps: partition number, key, value (None too: tombstones), headers in order with
duplicates, timestamp. What it adds: a `ferry.origin` header, unless the record already has
one (then it is kept unchanged, so later hops still name the first cluster). What it skips:
records whose origin is the target cluster itself (the identity policy's loop prevention).
Aborted transactional records never arrive (the consumer reads committed data only).

Downstream offsets come from delivery reports only (see deliveries): per record, or per chunk
of consecutive copies where ferry alone writes the target partition. For the chunk's last
copy to carry a callback, each partition's newest copy is held back until the next one (or
the end of the fetched batch) shows whether it is the last.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.engine.copy.ack_wait import AckWait, drop_outstanding, flush_until_acknowledged
from ferry.engine.copy.deliveries import LATENCY_SAMPLE_MASK, Chunk, DeliveryTracker
from ferry.engine.copy.errors import (
    beyond_end_error,
    consume_error,
    delivery_error,
    produce_error,
    producer_error,
    size_error,
    stall_error,
    unacknowledged_error,
)
from ferry.engine.copy.record_size import single_record_batch_size
from ferry.engine.copy.schemas import RegistryUnavailableError
from ferry.engine.copy.source_ends import TIMEOUT_SECONDS
from ferry.engine.copy.types import OPEN, CopyContext, CopyRange, PartitionResult, Slice
from ferry.engine.latency import Histogram
from ferry.errors import KafkaUnavailableError
from ferry.kafka.errors import Endpoint, kafka_error_of, kafka_errors
from ferry.kafka.provenance import ORIGIN_HEADER, origin_prefix

__all__ = ["copy_bin", "copy_ranges"]

_CONSUME_BATCH = 5000
# Any record at least this far below the topic limit fits; only bigger ones are measured.
_SIZE_CHECK_MARGIN = 8192
# How long a produce to a partition this producer does not know yet is retried while its
# metadata catches up with a partition the planner just added.
NEW_PARTITION_WAIT_SECONDS = 30.0
# At most what schema translation adds: two `ferry.schema.id.*` headers of up to 10 digits.
_TRANSLATION_HEADER_BYTES = 2 * (len("ferry.schema.id.value") + 10)


def copy_bin(
    consumer: Any,
    producer: Any,
    tracker: DeliveryTracker,
    ranges: Iterable[CopyRange],
    ctx: CopyContext,
    slice: Slice | None = None,
) -> list[PartitionResult]:
    """Copy every range; return per-partition results once the target acked all of them.

    Raises ReplicationError (halt: a record cannot be copied) or KafkaUnavailableError
    (retry later). Either way nothing is reported as copied, so the batch is not committed.
    """
    work = [r for r in ranges if r.end > r.start]
    producers = {(r.topic, r.partition): producer for r in work}
    return copy_ranges(consumer, producers, tracker, work, ctx, slice)


def copy_ranges(
    consumer: Any,
    producers: Mapping[tuple[str, int], Any],
    tracker: DeliveryTracker,
    work: list[CopyRange],
    ctx: CopyContext,
    slice: Slice | None = None,
) -> list[PartitionResult]:
    """`copy_bin` with a producer per source partition (exactly-once: one transaction each).

    With a `slice` (a lease, engine/copy/lease.py), ranges may be open (end OPEN): consuming
    stops when the slice's time is up, the copies are acknowledged as always, each result's
    `end` is where its range got to, and the consumer stays assigned for the next slice."""
    tracker.reset()
    try:
        results = _copy(consumer, producers, tracker, work, ctx, slice)
        for producer in _distinct(producers.values()):
            _flush(producer, tracker, ctx)
        if tracker.mismatches:
            raise _mismatch(tracker, ctx)
    except BaseException:
        consumer.unassign()
        raise
    if slice is None:
        consumer.unassign()
    for r in work:
        result, key = results[(r.topic, r.partition)], (r.remote_topic, r.partition)
        builder = tracker.builders.get(key)
        result.runs = builder.runs() if builder is not None else []
        result.latency = tracker.latency.get(key, Histogram())
    return list(results.values())


def _distinct(producers: Iterable[Any]) -> list[Any]:
    return list({id(p): p for p in producers}.values())


def _copy(
    consumer: Any,
    producers: Mapping[tuple[str, int], Any],
    tracker: DeliveryTracker,
    work: list[CopyRange],
    ctx: CopyContext,
    slice: Slice | None,
) -> dict[tuple[str, int], PartitionResult]:
    results = {
        (r.topic, r.partition): PartitionResult(
            r.topic, r.partition, r.start, r.end, topic_id=r.topic_id
        )
        for r in work
    }
    if not work:
        return results
    active = {(r.topic, r.partition): r for r in work}
    cursor = {tp: max(0, r.start) for tp, r in active.items()}
    ranges = dict(active)
    queues = {tp: tracker.expect(r.remote_topic, r.partition, r.topic) for tp, r in active.items()}
    chunked = {
        tp: tracker.chunked(r.remote_topic, r.partition, r.topic) for tp, r in active.items()
    }
    held: dict[tuple[str, int], tuple[Any, ...]] = {}  # per chunked partition, its newest copy
    chunks: dict[tuple[str, int], Chunk] = {}  # per chunked partition, its open chunk
    own_origin = f"{ctx.target_cluster_id}|".encode()
    prefixes = {
        tp: origin_prefix(ctx.source_cluster_id, ctx.source_alias, r.topic, r.partition)
        for tp, r in active.items()
    }
    distinct = _distinct(producers[tp] for tp in active)

    def poll(timeout: float) -> None:
        for p in distinct:
            _poll(p, timeout, ctx)

    finished: list[TopicPartition] = []
    # Partitions of open ranges held at a record whose schema registry did not answer: the
    # offset of that record, where the partition's copy resumes.
    on_hold: dict[tuple[str, int], int] = {}

    def finish(tp: tuple[str, int]) -> None:
        del active[tp]
        # Not pause(): librdkafka keeps a partition paused across assign(), so the next task
        # of this (cached) consumer would never receive it. Unassigned together, once per
        # consumed batch (one call per partition was a fifth of a small batch's time).
        finished.append(TopicPartition(tp[0], tp[1]))

    if slice is None or not slice.continuing:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in work])
    last_progress = time.monotonic()
    deadline = time.monotonic() + slice.seconds if slice is not None else float("inf")
    while active:
        if finished:
            consumer.incremental_unassign(finished)
            finished.clear()
        wait = min(0.1, deadline - time.monotonic())
        if wait < 0:
            break
        messages = _next_messages(consumer, wait)
        poll(0)
        if not messages:
            if time.monotonic() - last_progress > ctx.stall_timeout:
                raise stall_error(len(active), next(iter(active))[0], ctx)
            continue
        now_ms = time.time() * 1000
        got_data = False
        for m in messages:
            tp = (m.topic(), m.partition())
            if on_hold and tp in on_hold:
                continue  # fetched past its held record: fetched again from it next slice
            r = active.get(tp)
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    last_progress = time.monotonic()
                    # End of the committed log: nothing more can arrive inside this range.
                    if r is not None and m.offset() >= r.end:
                        finish(tp)
                    # An open range (a lease) stands at the log's end, past transaction
                    # markers too (librdkafka drops events of an earlier assignment).
                    elif r is not None and r.end == OPEN and m.offset() > cursor[tp]:
                        cursor[tp] = m.offset()
                    continue
                if err.code() == KafkaError._AUTO_OFFSET_RESET and r is not None:
                    _skip_expired(consumer, results[tp], cursor, r, ctx)
                    last_progress = time.monotonic()
                    continue
                halt = consume_error(err, m.topic(), m.partition(), m.offset(), ctx)
                if halt is not None:
                    raise halt
                continue
            if r is None:
                continue
            # Only data counts as progress: librdkafka repeats transient error events, and a
            # source that sends nothing else must still reach the stall timeout.
            got_data = True
            offset = m.offset()
            if offset < cursor[tp]:
                continue  # already seen (a stale prefetch of a reused consumer)
            if offset >= r.end:
                finish(tp)
                continue
            cursor[tp] = offset + 1
            result = results[tp]
            key = m.key()
            value = m.value()
            headers = m.headers()
            if headers is None:
                headers = []
            origin = None
            payload = (len(key) if key else 0) + (len(value) if value else 0)
            size = payload
            for name, data in headers:
                size += len(name) + (len(data) if data else 0)
                if name == ORIGIN_HEADER and origin is None:
                    origin = data
            if origin is None:
                before, after = prefixes[tp]
                headers.append((ORIGIN_HEADER, f"{before}{offset}{after}".encode()))
            elif origin.startswith(own_origin):
                result.skipped += 1  # it came from the target: copying it back would loop
                if offset == r.end - 1:
                    finish(tp)
                continue
            if ctx.translator is not None:  # before the size check: headers may grow
                try:
                    key, value = ctx.translator.translate(
                        r, offset, key, value, headers, result, ctx
                    )
                except RegistryUnavailableError as exc:
                    if r.end != OPEN:  # a bounded range must end where planned: retried
                        raise
                    # A lease: this partition holds at this record, the bin's others go on.
                    cursor[tp] = on_hold[tp] = offset
                    result.held = str(exc)  # for ferry status, while it holds
                    continue
                size += _TRANSLATION_HEADER_BYTES
            if size + _SIZE_CHECK_MARGIN > r.max_message_bytes:
                _check_size(key, value, headers, r, offset, ctx)
            timestamp = m.timestamp()[1]
            if timestamp > 0 and not offset & LATENCY_SAMPLE_MASK:
                result.record_age.observe(now_ms - timestamp)
            copy = (value, key, timestamp if timestamp >= 0 else 0, headers, offset)
            if chunked[tp]:
                previous = held.get(tp)
                held[tp] = copy
                if previous is not None:  # not the chunk's last: no callback unless first
                    chunk = chunks.get(tp)
                    if chunk is None:
                        chunk = chunks[tp] = tracker.chunk(r.remote_topic, r.partition)
                        _produce(producers[tp], r, previous, ctx, chunk.on_first)
                    else:
                        _produce(producers[tp], r, previous, ctx, None)
                    chunk.upstream.append(previous[4])
            else:
                _produce(producers[tp], r, copy, ctx, tracker.on_delivery)
                queues[tp].append(offset)
            result.copied += 1
            result.bytes += payload
            if offset == r.end - 1:
                finish(tp)
        if got_data:
            last_progress = time.monotonic()
        for tp, copy in held.items():  # each partition's last copy of this fetched batch
            r = ranges[tp]
            chunk = chunks.pop(tp, None)
            if chunk is None:
                chunk = tracker.chunk(r.remote_topic, r.partition)
                _produce(producers[tp], r, copy, ctx, chunk.on_only)
            else:
                _produce(producers[tp], r, copy, ctx, chunk.on_last)
            chunk.upstream.append(copy[4])
        held.clear()
    for tp, offset in on_hold.items():
        # Fetched again from the held record next slice (what was fetched past it is gone).
        consumer.incremental_unassign([TopicPartition(*tp)])
        consumer.incremental_assign([TopicPartition(tp[0], tp[1], offset)])
    for tp, result in results.items():
        if ranges[tp].end == OPEN:  # where the open range got to (its start if nowhere)
            result.end = cursor[tp] if cursor[tp] > max(0, ranges[tp].start) else ranges[tp].start
    return results


def _produce(
    producer: Any, r: CopyRange, copy: tuple[Any, ...], ctx: CopyContext, callback: Any
) -> None:
    """Produce one copy (value, key, timestamp, headers, upstream offset) with `callback`."""
    value, key, timestamp, headers, offset = copy
    metadata_wait: float | None = None
    full: AckWait | None = None  # how long a full queue has not drained (a stop gives up)
    while True:
        try:
            producer.produce(
                r.remote_topic,
                value,
                key,
                partition=r.partition,
                timestamp=timestamp,
                headers=headers,
                on_delivery=callback,
            )
            return
        except BufferError:  # the producer queue is full: let deliveries drain
            full = full or AckWait(ctx.stopping)
            _poll(producer, 0.05, ctx)
            gave_up = full.gives_up(len(producer))
            if gave_up is not None:
                drop_outstanding(producer)  # nothing of this batch is committed
                raise unacknowledged_error(gave_up, ctx) from None
        except KafkaException as exc:  # per code: retries an unknown partition
            # A partition the planner added a moment ago: this cached producer's metadata
            # predates it. Refresh it and retry, for a bounded time.
            error = kafka_error_of(exc)
            unknown = error is not None and error.code() == KafkaError._UNKNOWN_PARTITION
            now = time.monotonic()
            metadata_wait = metadata_wait or now + NEW_PARTITION_WAIT_SECONDS
            if not unknown or now >= metadata_wait:
                text = f"{type(exc).__name__}: {exc}"
                raise produce_error(error, text, r, offset, ctx) from None
            _refresh_metadata(producer, r.remote_topic)


@contextlib.contextmanager
def _producer_failure(ctx: CopyContext, doing: str) -> Iterator[None]:
    """A target producer's own exception (fenced, fatal: raised from every call) as ferry's
    error, where a new producer gets past it."""
    try:
        yield
    except KafkaException as exc:
        error = producer_error(kafka_error_of(exc), doing, ctx)
        if error is None:
            raise
        raise error from None


def _poll(producer: Any, timeout: float, ctx: CopyContext) -> None:
    """Serve the producer's delivery reports."""
    with _producer_failure(ctx, "serving delivery reports"):
        producer.poll(timeout)


def _mismatch(tracker: DeliveryTracker, ctx: CopyContext) -> KafkaUnavailableError:
    """Copies that did not take consecutive target offsets: their exact offsets are unknown,
    so the batch must not be committed. From now on the partition is tracked per record."""
    tracker.per_record.update((m[0], m[1]) for m in tracker.mismatches)
    topic, partition, upstream, count, first, last = tracker.mismatches[0]
    return KafkaUnavailableError(
        ctx.target_alias,
        ctx.target_bootstrap,
        f"{count} copies into {topic} partition {partition} (from source offset {upstream} "
        f"of {tracker.sources.get((topic, partition), '?')}) took target offsets {first} to "
        f"{last}, {last - first + 1} places: another producer writes into that partition, or "
        "a copy was lost in delivery. Nothing of this batch is committed; it is copied again, "
        "tracking every copy's offset",
        what="needs a batch copied again",
    )


def _refresh_metadata(producer: Any, topic: str) -> None:
    with contextlib.suppress(KafkaException):  # the retry loop's deadline decides
        producer.list_topics(topic, timeout=1.0)
    time.sleep(0.1)


def _skip_expired(
    consumer: Any,
    result: PartitionResult,
    cursor: dict[tuple[str, int], int],
    r: CopyRange,
    ctx: CopyContext,
) -> None:
    """The source deleted records ferry had not copied yet (retention): count them, go on.

    They cannot be copied any more; halting would halt forever. They are counted and reported
    (`expired`, with their offsets), never skipped silently. A position beyond the end is no
    retention: the topic was deleted and created again, and the copy stops (its retry starts
    the new topic from its beginning) rather than skip the new topic's first records.
    """
    tp = (r.topic, r.partition)
    # Asked while the source may be away (a cut link, a leader moving): ferry's retried error,
    # never a bare librdkafka one, which would stop `ferry run`.
    source = Endpoint(ctx.source_alias, ctx.source_bootstrap)
    with kafka_errors(source, f"read the bounds of {r.topic} partition {r.partition}"):
        bounds = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=TIMEOUT_SECONDS)
    if bounds is None:
        raise KafkaUnavailableError(
            ctx.source_alias,
            ctx.source_bootstrap,
            f"could not read the bounds of {r.topic} partition {r.partition}: "
            f"no answer within {TIMEOUT_SECONDS:.0f}s",
        )
    low, high = bounds
    if cursor[tp] > high:
        raise beyond_end_error(r, cursor[tp], high, ctx)
    lost = min(low, r.end) - cursor[tp]
    if lost > 0:
        result.expired += lost
        if result.lost_first < 0:
            result.lost_first = cursor[tp]
        result.lost_last = cursor[tp] + lost - 1
    cursor[tp] = max(cursor[tp], low)
    # Not seek(): after an offset-reset error the partition's fetcher is in an error state
    # and librdkafka refuses to seek it (_STATE); assigning it afresh restarts its fetcher.
    consumer.incremental_unassign([TopicPartition(*tp)])
    consumer.incremental_assign([TopicPartition(tp[0], tp[1], cursor[tp])])


def _next_messages(consumer: Any, wait: float = 0.1) -> list[Any]:
    """What is fetched already, or else the first message within `wait` seconds (100 ms).

    consume(n, timeout) waits for n messages or the whole timeout, so the tail of every range
    would cost the full timeout; poll() returns on the first message.
    """
    messages: list[Any] = consumer.consume(num_messages=_CONSUME_BATCH, timeout=0)
    if messages:
        return messages
    first = consumer.poll(wait)
    if first is None:
        return []
    return [first, *consumer.consume(num_messages=_CONSUME_BATCH - 1, timeout=0)]


def _flush(producer: Any, tracker: DeliveryTracker, ctx: CopyContext) -> None:
    """Wait until the target acknowledged (or refused) every record produced by this task."""
    with _producer_failure(ctx, "waiting for acknowledgements"):
        gave_up = flush_until_acknowledged(producer, ctx.stopping)
    if gave_up is not None:
        raise unacknowledged_error(gave_up, ctx)
    if not tracker.errors:
        return
    remote_topic, partition, upstream, err = tracker.errors[0]
    source_topic = tracker.sources.get((remote_topic, partition), remote_topic)
    raise delivery_error(
        remote_topic, partition, upstream, err, len(tracker.errors), source_topic, ctx
    )


def _check_size(
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    r: CopyRange,
    offset: int,
    ctx: CopyContext,
) -> None:
    size = single_record_batch_size(key, value, headers)
    if size > r.max_message_bytes:
        raise size_error(size, r, offset, ctx)
