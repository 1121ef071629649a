"""The mirror sink: each Spark task copies the ranges of its bin; the driver records the runs.

`write` runs in an executor's Python worker and returns only after the target acknowledged
every record of its ranges. `commit` runs on the driver once every task of the batch
succeeded, and before Spark records the batch as done in its checkpoint: it writes the exact
offset runs to the flow's offset-runs topic (and waits for the ack), commits the flow's
position in its group on the target (for `ferry status`) and updates the counters.
If anything fails first, Spark replays the batch: records may be copied twice (at-least-once),
never lost. In exactly-once mode each task commits one transaction per partition holding the
copies, the runs and the progress (`ferry.engine.copy.exactly_once`); a replayed batch skips what
committed, and `commit` only updates the counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from ferry.engine.copy.client_settings import (
    consumer_settings,
    producer_settings,
    progress_consumer_settings,
)
from ferry.engine.copy.exactly_once import TransactionalSettings, copy_bin_exactly_once
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.errors import FerryError, ReplicationError, error_to_text
from ferry.kafka.errors import unavailable
from ferry.kafka.offset_runs import OffsetSyncRecord
from ferry.policy import policy_for

__all__ = ["BinReport", "MirrorSink"]


def _dropping_clients_on_failure(
    copy: Callable[[], list[PartitionResult]], drop: Callable[[], None]
) -> list[PartitionResult]:
    """Run a copy; if it fails, drop its clients (a producer may be fenced, in a fatal state
    or hold purged copies) and turn ferry's errors into the one line Spark passes on."""
    try:
        return copy()
    except FerryError as exc:
        drop()
        raise RuntimeError(error_to_text(exc)) from None
    except BaseException:
        drop()
        raise


def _use_native(choice: str) -> bool:
    """`ferry.copier`: native (C over librdkafka), python, or auto (native where it loads).

    Exactly-once always uses the Python loop (a transactional producer per partition)."""
    if choice == "python":
        return False
    from ferry.engine.copy.native_loop import native_module, unavailable_reason

    if native_module() is not None:
        return True
    if choice == "native":
        raise RuntimeError(
            f"ferry.copier = native, but the native copier is not available here: "
            f"{unavailable_reason()}. Fix: reinstall ferry with a C compiler (make setup), "
            "or set ferry.copier = auto"
        )
    return False


@dataclass
class BinReport(WriterCommitMessage):
    results: list[PartitionResult]
    seconds: float
    copier: str = "python"  # which copy loop ran: native, python (exactly-once: python)


class MirrorSink(DataSourceStreamWriter):
    def __init__(self, spec: FlowSpec) -> None:
        self.spec = spec

    def write(self, iterator: Iterator[Any]) -> BinReport:
        from ferry.engine.copy import worker_clients

        began = time.monotonic()
        rows = list(iterator)
        if not rows:
            return BinReport([], 0.0)
        first = rows[0]
        ctx = CopyContext(
            source_alias=self.spec.source.alias,
            source_bootstrap=self.spec.source.bootstrap_servers,
            source_cluster_id=first.source_cluster_id,
            target_alias=self.spec.target.alias,
            target_bootstrap=self.spec.target.bootstrap_servers,
            target_cluster_id=first.target_cluster_id,
        )
        ranges = [
            CopyRange(r.topic, r.partition, r.start, r.end, r.remote_topic, r.max_message_bytes)
            for r in rows
        ]
        consumer_conf = consumer_settings(self.spec.source, self.spec.flow)
        if self.spec.flow.exactly_once:
            consumer = worker_clients.consumer_for(consumer_conf)
            results = self._copy_exactly_once(consumer, consumer_conf, ranges, ctx)
            return BinReport(results, time.monotonic() - began)
        producer_conf = producer_settings(self.spec.target)
        if _use_native(self.spec.flow.copier):
            from ferry.engine.copy.native_loop import copy_bin_native

            copier = worker_clients.native_copier_for(consumer_conf, producer_conf)
            results = _dropping_clients_on_failure(
                lambda: copy_bin_native(copier, ranges, ctx),
                lambda: worker_clients.evict_native(consumer_conf, producer_conf),
            )
            return BinReport(results, time.monotonic() - began, "native")
        consumer = worker_clients.consumer_for(consumer_conf)
        producer, tracker = worker_clients.producer_for(producer_conf)
        results = _dropping_clients_on_failure(
            lambda: copy_bin(consumer, producer, tracker, ranges, ctx),
            lambda: worker_clients.evict(consumer_conf, producer_conf),
        )
        return BinReport(results, time.monotonic() - began)

    def _copy_exactly_once(
        self,
        consumer: Any,
        consumer_conf: dict[str, str],
        ranges: list[CopyRange],
        ctx: CopyContext,
    ) -> list[PartitionResult]:
        from ferry.engine.copy import worker_clients

        progress_conf = progress_consumer_settings(self.spec.target, self.spec.flow)
        progress = worker_clients.consumer_for(progress_conf)
        settings = TransactionalSettings(producer_settings(self.spec.target), ctx)

        def producer_for(topic: str, partition: int, fresh: bool) -> Any:
            return worker_clients.transactional_producer(
                settings.for_partition(topic, partition), fresh
            )

        policy = policy_for(self.spec.flow.policy, self.spec.flow.source)
        try:
            return copy_bin_exactly_once(
                consumer,
                progress,
                producer_for,
                worker_clients.transactional_tracker,
                ranges,
                ctx,
                policy.offset_runs_topic(self.spec.flow.source),
            )
        except BaseException as exc:
            # Any of the bin's producers may be fenced or in a fatal state: start afresh.
            worker_clients.evict(consumer_conf, {})
            worker_clients.evict_transactional(
                [settings.for_partition(r.topic, r.partition) for r in ranges]
            )
            if isinstance(exc, FerryError):
                raise RuntimeError(error_to_text(exc)) from None
            raise

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        reports = [m for m in messages if isinstance(m, BinReport)]
        results = [r for report in reports for r in report.results]
        if not self.spec.flow.exactly_once:  # exactly-once wrote both in each transaction
            try:
                self._write_runs(results)
                self._commit_progress(results)
            except FerryError as exc:
                raise RuntimeError(error_to_text(exc)) from None
        FlowState(self.spec.state_dir).add_batch(
            batchId,
            [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "end": r.end,
                    "copied": r.copied,
                    "skipped": r.skipped,
                    "bytes": r.bytes,
                    "expired": r.expired,
                    "latency": r.latency.to_json(),
                    "record_age": r.record_age.to_json(),
                }
                for r in results
            ],
            max((report.seconds for report in reports), default=0.0),
            sorted({report.copier for report in reports if report.results}),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # nothing to undo: the batch is replayed, and copies are idempotent to consumers

    def _commit_progress(self, results: list[PartitionResult]) -> None:
        """The flow's position where anyone can read it (`ferry status` on any machine): the
        next source offset of each partition, as the remote partition's offset in the flow's
        group on the target (where exactly-once commits it too). Called after the target
        acknowledged the copies and their runs, so it never runs ahead of what is there."""
        from ferry.engine.copy import worker_clients

        if not results:
            return
        source = self.spec.flow.source
        policy = policy_for(self.spec.flow.policy, source)
        offsets = [
            TopicPartition(policy.remote_topic(source, r.topic), r.partition, r.end)
            for r in results
        ]
        settings = progress_consumer_settings(self.spec.target, self.spec.flow)
        try:
            worker_clients.consumer_for(settings).commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            worker_clients.evict(settings, {})
            raise unavailable(self.spec.target, exc) from None

    def _write_runs(self, results: list[PartitionResult]) -> None:
        from ferry.engine.copy import worker_clients

        records = [
            OffsetSyncRecord(self.spec.flow.source, r.topic, r.partition, run)
            for r in results
            for run in r.runs
        ]
        if not records:
            return
        policy = policy_for(self.spec.flow.policy, self.spec.flow.source)
        topic = policy.offset_runs_topic(self.spec.flow.source)
        producer, _tracker = worker_clients.producer_for(producer_settings(self.spec.target))
        failures: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(f"{err.name()}: {err.str()}")

        for record in records:
            producer.produce(
                topic, record.value_bytes(), record.key_bytes(), on_delivery=on_delivery
            )
        while producer.flush(1.0) > 0:
            pass
        if failures:
            raise ReplicationError(
                f"could not write {len(failures)} offset run(s): {failures[0]}.",
                cluster=self.spec.target.alias,
                topic=topic,
                partition=0,
                fix="check that ferry may write to this topic; rerun to retry the batch",
            )
