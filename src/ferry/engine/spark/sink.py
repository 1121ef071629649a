"""The mirror sink: each Spark task copies the ranges of its bin; the driver records the runs.

In lease mode (continuous `ferry run`) a task's `write` is a whole lease
(engine/copy/lease.py): it copies its partitions continuously and commits the runs and the
flow's position itself after every slice, so `commit` only updates the counters. What follows
is bounded micro-batches (`--once`, `ferry.lease.seconds = 0`).

`write` runs in an executor's Python worker and returns only after the target acknowledged
every record of its ranges. `commit` runs on the driver once every task of the batch
succeeded, and before Spark records the batch as done in its checkpoint: it writes the exact
offset runs to the flow's offset-runs topic (and waits for the ack), commits the flow's
position in its group on the target (for `ferry status`) and updates the counters.
If anything fails first, Spark replays the batch: records may be copied twice (at-least-once),
never lost. In exactly-once mode each task commits one transaction holding its partitions'
copies, runs and progress (`ferry.engine.copy.exactly_once`); a replayed batch skips what
committed, and `commit` only updates the counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage

from ferry.engine.copy.client_settings import (
    consumer_settings,
    producer_settings,
    progress_consumer_settings,
)
from ferry.engine.copy.exactly_once import committed_positions, copy_bin_exactly_once
from ferry.engine.copy.progress import commit_positions, write_runs
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.schemas import SchemaTranslator
from ferry.engine.copy.transactional import resume_at
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.engine.executors import UNKNOWN, TaskReport
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState, LeaseBounds, partition_entry
from ferry.engine.spark.lease_task import copy_lease
from ferry.engine.spark.task_support import (
    dropping_clients_on_failure,
    print_notices,
    task_executor,
    task_slot,
    transactional_producers,
    use_native,
)
from ferry.errors import FerryError, error_to_text

__all__ = ["BinReport", "MirrorSink"]


@dataclass
class BinReport(WriterCommitMessage):
    results: list[PartitionResult]
    seconds: float
    copier: str = "python"  # which copy loop ran: native, python (exactly-once: python)
    began_at: float = 0.0  # wall clock, when the task started and ended (a lease's bounds)
    ended_at: float = 0.0
    executor: dict[str, str] = field(default_factory=dict)  # id and host it ran on


def schema_translator(spec: FlowSpec) -> SchemaTranslator | None:
    """The worker's schema translator for the flow, where it syncs schemas: on, and both its
    clusters name a registry (FerryConfig.syncs_schemas). It needs the Python copy loop."""
    source, target = spec.source.schema_registry, spec.target.schema_registry
    if not (spec.flow.sync_schemas_enabled and source and target):
        return None
    from ferry.engine.copy.schemas import translator_for

    return translator_for(spec.source.alias, source, spec.target.alias, target)


class MirrorSink(DataSourceStreamWriter):
    def __init__(self, spec: FlowSpec, until: Callable[[], bool] | None = None) -> None:
        """`until`: the driver's head start (engine/head_start.py) copies with a sink of its
        own, whose lease also ends when this says so; Spark's sinks have none."""
        self.spec = spec
        self._until = until

    def write(self, iterator: Iterator[Any]) -> BinReport:
        began_at = time.time()
        report = self._write(iterator)
        report.began_at, report.ended_at = began_at, time.time()
        report.executor = task_executor()
        return report

    def _write(self, iterator: Iterator[Any]) -> BinReport:
        from ferry.engine.copy import worker_clients

        began = time.monotonic()
        rows = list(iterator)
        if not rows:
            return BinReport([], 0.0)
        head_start_running = False
        if self._until is None:  # a Spark task: the driver's head start stops first
            from ferry.engine.handover import take_over

            head_start_running = take_over(FlowState(self.spec.state_dir))
        first = rows[0]
        ctx = CopyContext(
            source_alias=self.spec.source.alias,
            source_bootstrap=self.spec.source.bootstrap_servers,
            source_cluster_id=first.source_cluster_id,
            target_alias=self.spec.target.alias,
            target_bootstrap=self.spec.target.bootstrap_servers,
            target_cluster_id=first.target_cluster_id,
            translator=schema_translator(self.spec),
            notice=lambda line: print_notices(self.spec, [line]),
            stopping=FlowState(self.spec.state_dir).stop_marker.exists,
        )
        ranges = [
            CopyRange(
                r.topic,
                r.partition,
                r.start,
                r.end,
                r.remote_topic,
                r.max_message_bytes,
                r.topic_id or "",
            )
            for r in rows
        ]
        consumer_conf = consumer_settings(self.spec.source, self.spec.flow)
        if head_start_running and self.spec.flow.exactly_once:
            self._fence_head_start(ctx)
        if self.spec.leased:
            log_ends = {(r.topic, r.partition): r.log_end for r in rows}
            results, copier = copy_lease(
                self.spec, self._until, consumer_conf, ranges, ctx, log_ends
            )
            return BinReport(results, time.monotonic() - began, copier)
        if self.spec.flow.exactly_once:
            consumer = worker_clients.consumer_for(consumer_conf)
            results = self._copy_exactly_once(consumer, consumer_conf, ranges, ctx)
            return BinReport(results, time.monotonic() - began)
        ranges = self._resumed(ranges, ctx)
        producer_conf = producer_settings(self.spec.target)
        if use_native(self.spec.flow.copier) and ctx.translator is None:
            from ferry.engine.copy.native_loop import copy_bin_native

            copier = worker_clients.native_copier_for(consumer_conf, producer_conf)
            results = dropping_clients_on_failure(
                lambda: copy_bin_native(copier, ranges, ctx),
                lambda: worker_clients.evict_native(consumer_conf, producer_conf),
            )
            return BinReport(results, time.monotonic() - began, "native")
        consumer = worker_clients.consumer_for(consumer_conf)
        producer, tracker = worker_clients.producer_for(producer_conf)
        results = dropping_clients_on_failure(
            lambda: copy_bin(consumer, producer, tracker, ranges, ctx),
            lambda: worker_clients.evict(consumer_conf, producer_conf),
        )
        return BinReport(results, time.monotonic() - began)

    def _resumed(self, ranges: list[CopyRange], ctx: CopyContext) -> list[CopyRange]:
        """Ranges that start at the flow's position on the target where that is ahead of the
        plan: a lease (or a run from another state directory) copied those records already."""
        from ferry.engine.copy import worker_clients

        progress_conf = progress_consumer_settings(self.spec.target, self.spec.flow)
        try:
            committed = committed_positions(worker_clients.consumer_for(progress_conf), ranges, ctx)
        except FerryError as exc:
            worker_clients.evict(progress_conf, {})
            raise RuntimeError(error_to_text(exc)) from None
        return [
            replace(r, start=resume_at(r.start, committed.get((r.remote_topic, r.partition))))
            for r in ranges
        ]

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
        task = task_slot(head_start=False)
        settings, producer_for = transactional_producers(self.spec, ctx, task)

        runs_topic = self.spec.flow.replication_policy.offset_runs_topic(self.spec.flow.source)

        def drop() -> None:  # the task's producer may be fenced or in a fatal state
            worker_clients.evict(consumer_conf, {})
            worker_clients.evict_transactional(settings.for_task_parities(task))

        tracker = worker_clients.transactional_tracker
        return dropping_clients_on_failure(
            lambda: copy_bin_exactly_once(
                consumer, progress, producer_for, tracker, ranges, ctx, runs_topic
            ),
            drop,
        )

    def _fence_head_start(self, ctx: CopyContext) -> None:
        """The head start did not stop in time: its transactional ids are fenced before this
        task reads the flow's positions, so nothing it still commits lands after that read."""
        from ferry.engine.copy.fencing import fence_tasks
        from ferry.engine.copy.transactional import HEAD_START_TASK, TransactionalSettings

        settings = TransactionalSettings.of(self.spec.target, ctx)
        try:
            fence_tasks(settings, [HEAD_START_TASK], ctx)
        except FerryError as exc:
            raise RuntimeError(error_to_text(exc)) from None

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        reports = [m for m in messages if isinstance(m, BinReport)]
        results = [r for report in reports for r in report.results]
        # Exactly-once wrote both in each transaction, a lease after each slice.
        if not self.spec.flow.exactly_once and not self.spec.leased:
            try:
                self._write_runs(results)
                self._commit_progress(results)
            except FerryError as exc:
                raise RuntimeError(error_to_text(exc)) from None
        state = FlowState(self.spec.state_dir)
        seconds = max((report.seconds for report in reports), default=0.0)
        copiers = sorted({report.copier for report in reports if report.results})
        if self.spec.leased:  # the tasks wrote what they committed as they went
            bounds = [(r.began_at, r.ended_at) for r in reports if r.began_at]
            state.absorb_leases(
                batchId,
                seconds,
                copiers,
                LeaseBounds(
                    self.spec.run_id,
                    min((b for b, _ in bounds), default=0.0),
                    max((e for _, e in bounds), default=0.0),
                ),
            )
            return
        tasks = [
            TaskReport(
                r.executor.get("id", UNKNOWN),
                r.executor.get("host", UNKNOWN),
                r.began_at,
                [partition_entry(x) for x in r.results],
            )
            for r in reports
        ]
        state.add_batch(batchId, [p for t in tasks for p in t.partitions], seconds, copiers, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # nothing to undo: the batch is replayed, and copies are idempotent to consumers

    def _commit_progress(self, results: list[PartitionResult]) -> None:
        """The flow's position where anyone can read it (`ferry status` on any machine): the
        next source offset of each partition, as the remote partition's offset in the flow's
        group on the target (where exactly-once commits it too). Called after the target
        acknowledged the copies and their runs, so it never runs ahead of what is there."""
        from ferry.engine.copy import worker_clients

        source = self.spec.flow.source
        policy = self.spec.flow.replication_policy
        positions = {(policy.remote_topic(source, r.topic), r.partition): r.end for r in results}
        ids = {(policy.remote_topic(source, r.topic), r.partition): r.topic_id for r in results}
        settings = progress_consumer_settings(self.spec.target, self.spec.flow)
        try:
            consumer = worker_clients.consumer_for(settings)
            commit_positions(consumer, self.spec.target, positions, ids)
        except FerryError:
            worker_clients.evict(settings, {})
            raise

    def _write_runs(self, results: list[PartitionResult]) -> None:
        from ferry.engine.copy import worker_clients

        flow = self.spec.flow
        topic = flow.replication_policy.offset_runs_topic(flow.source)
        producer, _tracker = worker_clients.producer_for(producer_settings(self.spec.target))
        stopping = FlowState(self.spec.state_dir).stop_marker.exists
        write_runs(producer, topic, flow.source, self.spec.target, results, stopping)
