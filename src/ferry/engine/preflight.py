"""Before `ferry run` starts Spark: both clusters of every flow answer (and their schema
registries, where the flow syncs schemas), the internal topics exist, and the copy loop is
the one a user would expect. An unreachable or misconfigured
cluster is reported before Spark spends seconds starting.

A cluster that does not answer is said once and retried until it does (`Retrier`); a `--once`
run waits for it at most `ferry.once.max.wait.seconds`, then exits naming it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from ferry.config.model import FerryConfig, FlowConfig
from ferry.engine.flow_supervisor import gave_up
from ferry.engine.plan.remote_topics import TopicManager
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError
from ferry.kafka.reachability import Reachability
from ferry.kafka.retry import retry_unavailable
from ferry.sync.heartbeats import ensure_heartbeats_topic

__all__ = ["Retrier", "check_copier", "fence_flow", "prepare"]


class Retrier:
    """Runs an action until the clusters it needs answer; stops waiting when the run stops."""

    def __init__(
        self,
        config: FerryConfig,
        *,
        once: bool,
        reach: Reachability,
        notice: Callable[[str], None],
        stopping: Callable[[], bool],
    ) -> None:
        self._config = config
        self._once = once
        self._reach = reach
        self._notice = notice
        self._stopping = stopping

    @property
    def call_timeout(self) -> float:
        """How long one request may wait for an answer: within a `--once` run's bound, so a
        cluster that does not answer ends the run after about that bound, not after the
        client's own timeout."""
        default = 15.0
        return min(default, self._config.once_max_wait_seconds) if self._once else default

    def __call__(self, action: Callable[[], object]) -> None:
        """`action` until it works; an unanswering cluster is said once, then retried (in a
        `--once` run for at most `ferry.once.max.wait.seconds`)."""
        bound = self._config.once_max_wait_seconds if self._once else None
        try:
            retry_unavailable(
                action,
                on_retry=self._say_unavailable,
                sleep=self._sleep,
                stopping=self._stopping,
                max_wait=bound,
            )
        except KafkaUnavailableError as exc:
            if bound is None or self._stopping():
                raise
            raise gave_up(exc, bound) from None
        for line in self._reach.answered_all():
            self._notice(line)

    def _say_unavailable(self, error: KafkaUnavailableError, _delay: float) -> None:
        line = self._reach.failed(error)
        if line is not None:
            self._notice(line)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping() and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def prepare(config: FerryConfig, flow: FlowConfig, retrying: Retrier) -> None:
    """The flow's offset-runs topic exists on the target (so both clusters answer)."""
    manager = TopicManager(
        flow,
        config.clusters[flow.source],
        config.clusters[flow.target],
        timeout=retrying.call_timeout,
    )
    policy = flow.replication_policy

    def ready() -> None:
        manager.cluster_ids()  # both clusters answer
        if config.syncs_schemas(flow):  # and both schema registries
            from ferry.engine.copy.schemas import check_registry

            for alias in (flow.source, flow.target):
                check_registry(alias, config.clusters[alias].schema_registry)
        manager.ensure_internal_topic(
            policy.offset_runs_topic(flow.source), flow.offset_syncs_topic_replication_factor
        )
        if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
            manager.ensure_internal_topic(
                policy.checkpoints_topic(flow.source),
                flow.checkpoints_topic_replication_factor,
                key="checkpoints.topic.replication.factor",
            )
        if flow.emit_heartbeats_enabled:
            # On the source before the first batch plans, so it is copied from the start.
            # A refusal (say, a replication factor above the broker count) only turns
            # heartbeats off; the control plane says so.
            with contextlib.suppress(ReplicationError):
                ensure_heartbeats_topic(
                    config.clusters[flow.source],
                    policy.heartbeats_topic(),
                    flow.heartbeats_topic_replication_factor,
                )

    retrying(ready)


def fence_flow(config: FerryConfig, flow: FlowConfig, slots: int, retrying: Retrier) -> None:
    """An exactly-once flow about to copy: the transactional ids of its task slots `[0, slots)`
    and of its head start, both parities, are fenced first (engine/copy/fencing.py), so no
    writer of an earlier run, killed or paused, commits after this run read the flow's
    positions, and no transaction such a run left open holds the target's consumers."""
    from ferry.engine.copy.fencing import fence_tasks
    from ferry.engine.copy.transactional import HEAD_START_TASK, TransactionalSettings
    from ferry.engine.copy.types import CopyContext

    source, target = config.clusters[flow.source], config.clusters[flow.target]
    manager = TopicManager(flow, source, target, timeout=retrying.call_timeout)

    def fence() -> None:
        source_id, target_id = manager.cluster_ids()
        ctx = CopyContext(
            flow.source,
            source.bootstrap_servers,
            source_id,
            flow.target,
            target.bootstrap_servers,
            target_id,
        )
        tasks = [*(str(slot) for slot in range(slots)), HEAD_START_TASK]
        fence_tasks(TransactionalSettings.of(target, ctx), tasks, ctx)

    retrying(fence)


def check_copier(
    flow: FlowConfig, notice: Callable[[str], None], syncs_schemas: bool = False
) -> None:
    """Say which copy loop runs when it is not the one a user would expect."""
    if flow.copier == "python" or flow.exactly_once:
        return
    if syncs_schemas:  # `native` with schema sync was refused at load
        notice(
            f"flow {flow.name}: copying with the Python loop (schema ids are translated "
            "there; the native loop copies bytes unchanged)"
        )
        return
    from ferry.engine.copy.native_loop import native_module, unavailable_reason

    if native_module() is not None:
        return
    if flow.copier == "native":
        raise FerryError(
            f"flow {flow.name}: ferry.copier = native, but the native copy loop is not "
            f"available: {unavailable_reason()}. Fix: reinstall ferry where a C compiler "
            "is available (make setup), or set ferry.copier = auto"
        )
    notice(
        f"flow {flow.name}: copying with the Python loop (the native one is not "
        f"available: {unavailable_reason()})"
    )
