"""Exactly-once copying: one Kafka transaction per copy task per batch (or per slice of a
lease, `run_lease_exactly_once`), holding every partition of the task's bin.

Each task writes with a transactional producer whose `transactional.id` names the flow and
the task's slot (engine/copy/transactional.py). Starting a producer with that id fences every
older one (a task Spark retried, a worker of a killed `ferry run` still writing) and aborts
the transaction such a zombie left open. A task's transaction holds:

- the copies of its partitions' records;
- their offset runs (the offset index failover uses), in the runs topic;
- their progress: each partition's next source offset, committed as the offset of the
  *remote* partition in the flow's group on the target (`send_offsets_to_transaction`), so it
  commits or aborts with the data it describes.

Before copying, a task reads that progress (read_committed: pending offsets are waited for)
and starts each partition there if it is ahead of Spark's plan, so a batch Spark replays
after a crash writes nothing twice. The order matters: the producer is started (fencing its
slot's earlier writers; a run's start fenced every slot an earlier run used) before the
progress is read, so no other writer can commit between the read and this task's commit; a
producer fenced in between fails its commit and writes nothing visible.

One transaction per task rather than per partition: a slice costs the coordinators the same
few requests (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) whatever the
number of partitions it moved.

In a lease each task has two producers, ids of two parities, and consecutive slices
alternate between them, so that one slice's transaction commits while the next slice copies
(engine/copy/commit_pipeline.py says why that stays exact).

Errors follow confluent-kafka's transactional guide: a retriable commit is retried, an
abortable error aborts the transaction, a fatal one (fenced) drops the producer. The task then
fails with KafkaUnavailableError, and ferry restarts the batch from its checkpoint.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.engine.copy import worker_clients
from ferry.engine.copy.commit_pipeline import CommitPipeline
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.errors import fenced, fenced_error
from ferry.engine.copy.lease import LeaseTerms, run_lease, start_positions
from ferry.engine.copy.progress import progress_offset, topic_id_of
from ferry.engine.copy.python_loop import copy_ranges
from ferry.engine.copy.source_ends import high_watermarks
from ferry.engine.copy.transactional import PARITIES, ProducerFor, resume_at
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult, Slice
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.errors import Endpoint, kafka_error_of, kafka_errors
from ferry.kafka.group_offsets import committed_in_batches
from ferry.kafka.offset_runs import OffsetSyncRecord

__all__ = [
    "committed_positions",
    "committed_progress",
    "copy_bin_exactly_once",
    "run_lease_exactly_once",
    "verified_progress",
]

TP = tuple[str, int]
COMMIT_TIMEOUT_SECONDS = 60.0
# Adding the position to a transaction: librdkafka's own timeout, then how much longer ferry
# waits before it gives the producer up (see `_send_offsets`).
SEND_OFFSETS_TIMEOUT_SECONDS = 20.0
SEND_OFFSETS_GRACE_SECONDS = 5.0


def copy_bin_exactly_once(
    consumer: Any,
    progress: Any,
    producer_for: ProducerFor,
    tracker: DeliveryTracker,
    ranges: list[CopyRange],
    ctx: CopyContext,
    runs_topic: str,
) -> list[PartitionResult]:
    """Copy the task's ranges in one transaction; return results once it committed.

    `progress` is a consumer on the target in the flow's group (its committed offsets are the
    progress; its group metadata goes with the transaction). `producer_for(fresh)` returns the
    task's started transactional producer (`fresh`: a new one, the cached one having failed).
    """
    work = [r for r in ranges if r.end > r.start]
    if not work:
        return []
    with _retried_later(work, ctx, "the transactional copy failed"):
        producer = producer_for(False)
        group = progress.consumer_group_metadata()
        for fresh in (False, True):
            if fresh:  # the cached producer was fenced: a new one, and the progress read after it
                producer = producer_for(True)
            # Read after the producer started (fencing the slot's earlier writers), and before
            # the transaction begins: a stable read waits for pending offsets, ours included.
            committed = committed_positions(progress, work, ctx)
            todo: list[CopyRange] = []
            done: list[PartitionResult] = []
            for r in work:
                start = resume_at(r.start, committed.get((r.remote_topic, r.partition)))
                if start >= r.end:  # already in the target (a replayed batch): nothing to write
                    done.append(PartitionResult(r.topic, r.partition, r.start, r.end))
                else:
                    todo.append(replace(r, start=start))
            if not todo:
                return done
            try:
                # The final progress attached first: that asks the transaction coordinator at
                # once whether a cached producer is still the current one.
                producer.begin_transaction()
                offsets = [
                    progress_offset(r.remote_topic, r.partition, r.end, r.topic_id) for r in todo
                ]
                _send_offsets(producer, offsets, group, todo, ctx)
                break
            except KafkaException as exc:  # replaces a fenced producer once first
                _abort_quietly(producer)
                if fresh:
                    raise _retry_later(exc, todo, ctx, "could not begin a transaction") from None
        try:
            producers = {(r.topic, r.partition): producer for r in todo}
            copied = copy_ranges(consumer, producers, tracker, todo, ctx)
            failures: list[str] = []
            for result in copied:
                failures += _write_runs(producer, runs_topic, ctx, result)
            _commit(producer, todo, ctx, failures)
        except BaseException:
            _abort_quietly(producer)
            raise
        planned = {(r.topic, r.partition): r.start for r in work}
        for result in copied:
            result.start = planned[(result.topic, result.partition)]
        return done + copied


def _each(items: list[Any], action: Callable[[Any], Any]) -> list[Any]:
    """`action` on every item at once (threads: librdkafka calls release the GIL); the
    results in order, or the first failure once all have finished."""
    if len(items) <= 1:
        return [action(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), 16)) as pool:
        futures = [pool.submit(action, item) for item in items]
        wait(futures)
    return [f.result() for f in futures]


def _partitions_text(ranges: list[CopyRange]) -> str:
    """The partitions of a task's transaction, for its errors."""
    if len(ranges) == 1:
        return f"{ranges[0].topic} partition {ranges[0].partition}"
    named = ", ".join(f"{r.topic} partition {r.partition}" for r in ranges[:3])
    more = f" and {len(ranges) - 3} more" if len(ranges) > 3 else ""
    return f"{len(ranges)} partitions ({named}{more})"


def _send_offsets(
    producer: Any,
    offsets: list[TopicPartition],
    group: Any,
    ranges: list[CopyRange],
    ctx: CopyContext,
) -> None:
    """`send_offsets_to_transaction`, bounded in time whatever librdkafka does.

    librdkafka (2.16) can wait past the call's timeout when the group coordinator went away
    during the transaction (the target's broker restarted): its coordinator requests are
    never timed out, and the call may never return. So the call runs on a thread of its own;
    a producer that has not answered in time is abandoned (`worker_clients.abandon`: never
    used or closed again, its successor fences it) and the task fails, to be retried with a
    new producer. Its transaction holds nothing committed: nothing is lost or doubled."""
    outcome: list[BaseException | None] = []

    def send() -> None:
        try:
            producer.send_offsets_to_transaction(offsets, group, SEND_OFFSETS_TIMEOUT_SECONDS)
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    caller = threading.Thread(target=send, name="ferry-send-offsets", daemon=True)
    caller.start()
    caller.join(SEND_OFFSETS_TIMEOUT_SECONDS + SEND_OFFSETS_GRACE_SECONDS)
    if not outcome:
        worker_clients.abandon(producer)
        raise KafkaUnavailableError(
            ctx.target_alias,
            ctx.target_bootstrap,
            f"adding ferry's position for {_partitions_text(ranges)} to a transaction "
            f"did not finish in {SEND_OFFSETS_TIMEOUT_SECONDS + SEND_OFFSETS_GRACE_SECONDS:.0f}"
            " s (the group coordinator is unreachable); nothing of the transaction is visible "
            "to read_committed consumers; retrying with a new producer",
        )
    if outcome[0] is not None:
        raise outcome[0]


def committed_positions(progress: Any, work: list[CopyRange], ctx: CopyContext) -> dict[TP, int]:
    """The flow's committed position of each remote partition of `work` (negative: none)."""
    return {tp: offset for tp, (offset, _id) in committed_progress(progress, work, ctx).items()}


def committed_progress(
    progress: Any, work: list[CopyRange], ctx: CopyContext
) -> dict[TP, tuple[int, str]]:
    """Each remote partition's committed position and the source topic id committed beside
    it ("": none), by remote topic and partition."""
    if not work:
        return {}
    request = [TopicPartition(r.remote_topic, r.partition) for r in work]
    target = Endpoint(ctx.target_alias, ctx.target_bootstrap)
    with kafka_errors(target, "read ferry's committed progress"):
        answer = committed_in_batches(progress, request, COMMIT_TIMEOUT_SECONDS)
    failed = [(tp, tp.error) for tp in answer if tp.error is not None]
    if failed:
        # Never read as "no position": that copies the partition again from its start.
        tp, error = failed[0]
        raise KafkaUnavailableError(
            ctx.target_alias,
            ctx.target_bootstrap,
            f"could not read ferry's committed progress of {tp.topic} partition "
            f"{tp.partition}: {error.name()}: {error.str()}",
        )
    return {(tp.topic, tp.partition): (tp.offset, topic_id_of(tp.metadata)) for tp in answer}


def verified_progress(
    progress: Any, work: list[CopyRange], ctx: CopyContext
) -> dict[TP, tuple[int, str]]:
    """`committed_progress`, refusing to resume a position committed beside a topic id when
    the source did not say (in time) which topic the range's is now: resumed blind, a topic
    deleted and created again would be read on from the old position, inside the new topic.
    The lease fails as the source not answering; its retry asks again."""
    committed = committed_progress(progress, work, ctx)
    for r in work:
        offset, topic_id = committed.get((r.remote_topic, r.partition), (-1, ""))
        if offset >= 0 and topic_id and not r.topic_id:
            raise KafkaUnavailableError(
                ctx.source_alias,
                ctx.source_bootstrap,
                f"could not read the id of topic {r.topic}: ferry's position {offset} in "
                f"partition {r.partition} was committed in topic id {topic_id}, and is not "
                "resumed before the source says the topic is still that one",
            )
    return committed


def _write_runs(producer: Any, topic: str, ctx: CopyContext, result: PartitionResult) -> list[str]:
    """Adds the partition's runs to its transaction (the commit flushes them); returns a list
    that delivery failures are appended to, for the commit's error."""
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(f"offset run to {topic}: {err.name()}: {err.str()}")

    for run in result.runs:
        record = OffsetSyncRecord(ctx.source_alias, result.topic, result.partition, run)
        producer.produce(topic, record.value_bytes(), record.key_bytes(), on_delivery=on_delivery)
    return failures


def _commit(producer: Any, ranges: list[CopyRange], ctx: CopyContext, failures: list[str]) -> None:
    deadline = time.monotonic() + COMMIT_TIMEOUT_SECONDS
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as exc:  # retries retriable codes to the deadline
            error = kafka_error_of(exc)
            if error is not None and error.retriable() and time.monotonic() < deadline:
                continue
            what = "the transaction did not commit"
            if failures:
                what += f" ({failures[0]})"
            raise _retry_later(exc, ranges, ctx, what) from None


def _abort_quietly(producer: Any) -> None:
    if worker_clients.abandoned(producer):
        return  # stuck in a call: its successor's start aborts what it left open
    # Fatal (fenced) or no transaction open: the coordinator aborts or already aborted it.
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(COMMIT_TIMEOUT_SECONDS)


def _retry_later(
    exc: KafkaException, ranges: list[CopyRange], ctx: CopyContext, what: str
) -> Exception:
    error = kafka_error_of(exc)
    name = error.name() if error is not None else type(exc).__name__
    text = error.str() if error is not None else str(exc)
    if error is not None and error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return ReplicationError(
            f"{what} on {ctx.target_alias}: {name}: {text}.",
            cluster=ctx.source_alias,
            topic=ranges[0].topic,
            partition=ranges[0].partition if len(ranges) == 1 else None,
            fix=f"grant ferry's principal WRITE and DESCRIBE on transactional ids "
            f"'ferry:{ctx.source_alias}->{ctx.target_alias}:' (prefixed) in {ctx.target_alias}",
        )
    if error is not None and fenced(error):
        return fenced_error(f"{what} for {_partitions_text(ranges)} ({name}: {text})", ctx)
    return KafkaUnavailableError(
        ctx.target_alias,
        ctx.target_bootstrap,
        f"{what} for {_partitions_text(ranges)} ({name}: {text}); nothing of it is "
        "visible to read_committed consumers; retrying",
    )


@contextlib.contextmanager
def _retried_later(ranges: list[CopyRange], ctx: CopyContext, what: str) -> Iterator[None]:
    """Any exception librdkafka raises in a transactional copy as ferry's error (retried: a
    new producer gets past it), however deep the call: a fenced producer raises its fatal
    error from every call (begin_transaction, produce, poll, init). A raw one reached
    `ferry run` with no ferry error in it and stopped the run, as when a paused run woke
    after another took over and a retried task of the two fenced the other's."""
    try:
        yield
    except KafkaException as exc:
        raise _retry_later(exc, ranges, ctx, what) from None


def run_lease_exactly_once(
    consumer: Any,
    progress: Any,
    producer_for: ProducerFor,
    tracker: DeliveryTracker,
    ranges: list[CopyRange],
    ctx: CopyContext,
    runs_topic: str,
    terms: LeaseTerms,
    log_ends: dict[TP, int],
) -> tuple[list[PartitionResult], list[str]]:
    """A lease in exactly-once mode: one transaction per slice for all the task's partitions.

    Both producers of the task are started afresh first (fencing whoever wrote in its slot
    before: the previous lease's task, an attempt Spark gave up on, a killed `ferry run`'s
    worker), then the committed positions are read (a stable read: pending offsets are waited
    for). Each slice begins a transaction with the slice's producer, copies, and hands the
    commit of the copies, their runs and the new positions to the commit pipeline, which runs
    it while the next slice copies with the other producer. Returns the lease's results and
    any notices (see `lease.start_positions`)."""
    with _retried_later(ranges, ctx, "the lease's transactional copy failed"):
        producers = _each(list(PARITIES), lambda parity: producer_for(True, parity))
        committed = verified_progress(progress, ranges, ctx)
        positions, notices = start_positions(
            ranges, committed, log_ends, lambda tps: high_watermarks(consumer, tps, ctx)
        )
        group = progress.consumer_group_metadata()
        # One slice's commit markers land among the next slice's copies: only per-record delivery
        # reports tell each copy's offset then (a chunk's span would look like another writer's).
        tracker.track_per_record([(r.remote_topic, r.partition) for r in ranges])
        pipeline = CommitPipeline()
        slices = 0

        def copy_slice(work: list[CopyRange], slice: Slice) -> list[PartitionResult]:
            nonlocal slices
            producer = producers[slices % len(PARITIES)]
            slices += 1
            producer.begin_transaction()  # local: nothing reaches the coordinator yet
            try:
                # Returns once every copy is acknowledged: the next slice's copies follow them.
                results = copy_ranges(
                    consumer,
                    {(r.topic, r.partition): producer for r in work},
                    tracker,
                    work,
                    ctx,
                    slice,
                )
                moved = [
                    (r, result)
                    for r, result in zip(work, results, strict=True)
                    if result.end != r.start or result.runs
                ]
                if moved:
                    pipeline.submit(lambda: _commit_slice(producer, group, runs_topic, ctx, moved))
                else:
                    # Idle: the empty transaction ends locally, but through the pipeline all the
                    # same, after the previous slice's commit. Submitting is what waits for the
                    # commit before it, and the slice after next begins on the producer that
                    # commit uses (its send_offsets still running there was a _CONFLICT).
                    pipeline.submit(lambda: producer.commit_transaction(COMMIT_TIMEOUT_SECONDS))
                if slice.settle:
                    pipeline.wait()  # the lease's end is committed before the lease returns
                return results
            except BaseException:
                pipeline.close()
                _each(producers, _abort_quietly)
                raise

        try:
            results = run_lease(ranges, positions, terms, copy_slice, lambda _results: None)
            pipeline.wait()
        finally:
            pipeline.close()
        return results, notices


def _commit_slice(
    producer: Any,
    group: Any,
    runs_topic: str,
    ctx: CopyContext,
    moved: list[tuple[CopyRange, PartitionResult]],
) -> None:
    """The slice's runs and positions of every partition that moved, added to its
    transaction, then the commit."""
    ranges = [r for r, _result in moved]
    failures: list[str] = []
    for _r, result in moved:
        failures += _write_runs(producer, runs_topic, ctx, result)
    offsets = [
        progress_offset(r.remote_topic, r.partition, result.end, r.topic_id)
        for r, result in moved
        if result.end >= 0
    ]
    if offsets:
        try:
            _send_offsets(producer, offsets, group, ranges, ctx)
        except KafkaException as exc:  # every code but auth is retried: _retry_later
            what = "could not add ferry's position to a transaction"
            raise _retry_later(exc, ranges, ctx, what) from None
    _commit(producer, ranges, ctx, failures)
