"""A leased task of the mirror sink: its bin copied continuously for one lease.

The task reads the flow's position from the target, copies in slices of
`ferry.commit.interval.ms` and commits after each (at-least-once: the slice's offset runs,
then the positions; exactly-once: one transaction per slice for all its partitions), until
the lease is over: its time is up, `ferry run` is stopping, or the assignment must change
(engine/copy/lease.py holds the loop; this module gives it its clients and its end).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from ferry.engine.copy.client_settings import producer_settings, progress_consumer_settings
from ferry.engine.copy.exactly_once import run_lease_exactly_once, verified_progress
from ferry.engine.copy.lease import (
    LeaseTerms,
    run_lease,
    start_positions,
    with_source_ids,
)
from ferry.engine.copy.progress import LeaseCommitter
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.source_ends import high_watermarks
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState, partition_entry
from ferry.engine.lease_signals import LeaseSignals
from ferry.engine.plan.topic_ids import describe_source_topics
from ferry.engine.spark.task_support import (
    dropping_clients_on_failure,
    print_notices,
    task_executor,
    task_slot,
    transactional_producers,
    use_native,
)
from ferry.errors import FerryError, error_to_text

__all__ = ["copy_lease"]

# How long a lease's start waits for the source to describe its topics; without an answer the
# plan's ids stand.
ID_TIMEOUT_SECONDS = 10.0


def copy_lease(
    spec: FlowSpec,
    until: Callable[[], bool] | None,
    consumer_conf: dict[str, str],
    ranges: list[CopyRange],
    ctx: CopyContext,
    log_ends: dict[tuple[str, int], int],
) -> tuple[list[PartitionResult], str]:
    """Copy `ranges` continuously for one lease; the results and the copy loop that ran.
    `until`: the driver's head start's own end (engine/head_start.py); Spark's tasks have none."""
    from ferry.engine.copy import worker_clients

    flow = spec.flow
    state = FlowState(spec.state_dir)
    # The topics' ids now, not the plan's: where the position is read, they tell a topic
    # deleted and created again since the plan from the one ferry's position is in.
    admin = worker_clients.admin_for(spec.source.admin_config())
    described = describe_source_topics(admin, {r.topic for r in ranges}, timeout=ID_TIMEOUT_SECONDS)
    if described.gone:
        # Deleted since the plan (or the batch Spark replays after a restart names them):
        # nothing to copy, and their positions could never be verified. The next plan no
        # longer has them; a topic created again under the name is planned by its new id.
        print_notices(spec, [gone_notice(spec, sorted(described.gone))])
        ranges = [r for r in ranges if r.topic not in described.gone]
        if not ranges:
            return [], "python"
    ranges = with_source_ids(ranges, described.ids)
    driver = (
        LeaseSignals(spec.signals_url, spec.signals_token, flow.name) if spec.signals_url else None
    )

    def lease_over() -> bool:  # ferry run is stopping, or the assignment must change
        if until is not None:  # the head start: until a task takes over
            return until() or state.stop_marker.exists()
        if state.stop_marker.exists() or state.replan_marker.exists():
            return True
        return driver is not None and driver.over()

    terms = LeaseTerms(
        flow.lease_seconds,
        flow.commit_interval,
        lease_over,
        _live_writer(state, driver),
        short_catch_up_slices=not flow.exactly_once,
    )
    runs_topic = flow.replication_policy.offset_runs_topic(flow.source)
    progress_conf = progress_consumer_settings(spec.target, flow)
    if flow.exactly_once:
        consumer = worker_clients.consumer_for(consumer_conf)
        progress = worker_clients.consumer_for(progress_conf)
        task = task_slot(head_start=until is not None)
        settings, producer_for = transactional_producers(spec, ctx, task)

        def lease_exactly_once() -> list[PartitionResult]:
            results, notices = run_lease_exactly_once(
                consumer,
                progress,
                producer_for,
                worker_clients.transactional_tracker,
                ranges,
                ctx,
                runs_topic,
                terms,
                log_ends,
            )
            print_notices(spec, notices)
            return results

        def drop() -> None:
            worker_clients.evict(consumer_conf, {})
            worker_clients.evict_transactional(settings.for_task_parities(task))

        results = dropping_clients_on_failure(lease_exactly_once, drop)
        return results, "python"
    producer_conf = producer_settings(spec.target)
    progress = worker_clients.consumer_for(progress_conf)
    runs_producer, _tracker = worker_clients.producer_for(producer_conf)
    try:
        committed = verified_progress(progress, ranges, ctx)
        positions, notices = start_positions(
            ranges,
            committed,
            log_ends,
            lambda tps: high_watermarks(worker_clients.consumer_for(consumer_conf), tps, ctx),
        )
    except FerryError as exc:
        worker_clients.evict(progress_conf, {})
        raise RuntimeError(error_to_text(exc)) from None
    print_notices(spec, notices)

    remote = {(r.topic, r.partition): r.remote_topic for r in ranges}
    ids = {(r.remote_topic, r.partition): r.topic_id for r in ranges}
    committer = LeaseCommitter(
        runs_producer, progress, runs_topic, flow.source, spec.target, ids, ctx.stopping
    )

    def lease(copy_slice: Callable[..., list[PartitionResult]]) -> list[PartitionResult]:
        def commit(results: list[PartitionResult]) -> None:
            committer.commit(
                results, {(remote[(x.topic, x.partition)], x.partition): x.end for x in results}
            )

        results = run_lease(ranges, positions, terms, copy_slice, commit)
        committer.finish()
        return results

    if use_native(flow.copier) and ctx.translator is None:
        from ferry.engine.copy.native_loop import copy_bin_native

        copier = worker_clients.native_copier_for(consumer_conf, producer_conf)
        results = dropping_clients_on_failure(
            lambda: lease(lambda work, s: copy_bin_native(copier, work, ctx, s)),
            lambda: worker_clients.evict_native(consumer_conf, producer_conf),
        )
        copier.release()
        return results, "native"
    consumer = worker_clients.consumer_for(consumer_conf)
    producer, tracker = worker_clients.producer_for(producer_conf)
    results = dropping_clients_on_failure(
        lambda: lease(lambda work, s: copy_bin(consumer, producer, tracker, work, ctx, s)),
        lambda: worker_clients.evict(consumer_conf, producer_conf),
    )
    consumer.unassign()
    return results, "python"


def gone_notice(spec: FlowSpec, topics: list[str]) -> str:
    named = ", ".join(topics[:5]) + (f" and {len(topics) - 5} more" if len(topics) > 5 else "")
    return (
        f"topic(s) {named} no longer exist on {spec.source.alias}: not copied by this lease "
        "(their positions on the target are kept)"
    )


def _live_writer(
    state: FlowState, driver: LeaseSignals | None
) -> Callable[[list[PartitionResult]], None]:
    """What a leased task committed so far, for the driver's counters while the lease runs:
    to the driver on a cluster, else into the state directory. Statistics only: a driver that
    does not answer, or a state directory this executor cannot write, is no reason to stop."""
    import uuid

    from pyspark import TaskContext

    context = TaskContext.get()
    task = f"{context.partitionId()}-{context.attemptNumber()}-" if context else ""
    name = f"{task}{uuid.uuid4().hex[:12]}"
    executor = task_executor()
    began = time.time()

    def write(results: list[PartitionResult]) -> None:
        entries = [partition_entry(r) for r in results]
        if driver is not None:
            driver.write_live(name, entries, executor, began)
            return
        with contextlib.suppress(OSError):
            state.write_live(name, entries, executor, began)

    return write
