"""The periodic work `ferry run` does beside copying: checkpoints, group offset sync,
mirroring consumer timestamps, heartbeats, topic config sync, topic ACL sync and the
protection of remote topics.

One thread in the driver runs each task when it is due. A cluster that does not answer only
postpones a task to its next turn (and says so): bookkeeping must never stop the copying.
`ferry run --once` calls `run_once()` after copying, so a one-shot catch-up leaves fresh
checkpoints behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.kafka.log import quiet
from ferry.kafka.reachability import Reachability
from ferry.offsets.consumer_timestamps import TimestampMirror
from ferry.sync.acls import AclSync
from ferry.sync.checkpoints import CheckpointEmitter, SyncReport
from ferry.sync.heartbeats import HeartbeatEmitter
from ferry.sync.topic_configs import TopicConfigSync
from ferry.sync.topic_protection import PROTECT_INTERVAL_SECONDS, RemoteTopicProtection

__all__ = ["SyncLoop"]


@dataclass
class _Task:
    name: str
    interval: float
    action: Callable[[], SyncReport]
    due: float = 0.0
    down: str | None = None  # the cluster that did not answer this task's last turn


class SyncLoop:
    def __init__(
        self,
        config: FerryConfig,
        on_notice: Callable[[str], None] | None = None,
        reachability: Reachability | None = None,
        controls: Callable[[FlowConfig], FlowControl] | None = None,
    ) -> None:
        """`controls`: each flow's runtime override (ferry.control), for the checkpoints and
        the remote topics' protection (lifted by a failover)."""
        self._controls = controls
        self._notice = on_notice or (lambda _m: None)
        # Shared with the runner: an outage is said once, whoever meets it first.
        self._reach = reachability or Reachability()
        self._tasks: list[_Task] = []
        self._closers: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0
        for flow in config.enabled_flows:
            self._add_tasks(config, flow)

    def _add_tasks(self, config: FerryConfig, flow: FlowConfig) -> None:
        """Each task only when enabled with a positive interval (a negative one turns it off)."""

        def add(what: str, enabled: bool, interval: float, make: Callable[[], Any]) -> None:
            if enabled and interval > 0:
                self._tasks.append(_Task(f"{flow.name} {what}", interval, make()))

        def heartbeats() -> Callable[[], SyncReport]:
            emitter = HeartbeatEmitter(config, flow)
            self._closers.append(emitter.close)
            return emitter.emit

        def timestamps() -> Callable[[], SyncReport]:
            mirror = _timestamps_mirror(config, flow)
            self._closers.append(mirror.close)
            return partial(_mirror_timestamps, mirror, config.clusters[flow.source])

        offsets: list[CheckpointEmitter] = []

        def emitter() -> CheckpointEmitter:  # one for checkpoints and group sync
            if not offsets:
                control = partial(self._controls, flow) if self._controls else None
                offsets.append(CheckpointEmitter(config, flow, control=control))
                self._closers.append(offsets[0].close)
            return offsets[0]

        checkpoints = flow.emit_checkpoints_enabled
        every = flow.emit_checkpoints_interval_seconds
        add(
            "heartbeats",
            flow.emit_heartbeats_enabled,
            flow.emit_heartbeats_interval_seconds,
            heartbeats,
        )
        add(
            "topic ACLs",
            flow.sync_topic_acls_enabled,
            flow.sync_topic_acls_interval_seconds,
            lambda: AclSync(config, flow).sync,
        )
        add(
            "remote topic protection",
            flow.protect_remote_topics,
            PROTECT_INTERVAL_SECONDS,
            lambda: (
                RemoteTopicProtection(
                    config, flow, partial(self._controls, flow) if self._controls else None
                ).protect
            ),
        )
        add(
            "topic configs",
            flow.sync_topic_configs_enabled,
            flow.sync_topic_configs_interval_seconds,
            lambda: TopicConfigSync(config, flow).sync,
        )
        add("checkpoints", checkpoints, every, lambda: emitter().emit_checkpoints)
        add("consumer timestamps", checkpoints, every, timestamps)
        add(
            "group offset sync",
            flow.sync_group_offsets_enabled,
            flow.sync_group_offsets_interval_seconds,
            lambda: emitter().sync_groups,
        )

    @property
    def tasks(self) -> list[str]:
        return [t.name for t in self._tasks]

    def run_once(self) -> list[tuple[str, SyncReport]]:
        """Every task once, in order; errors are raised (used by `ferry run --once`)."""
        reports = []
        for task in self._tasks:
            report = task.action()
            self._report(task, report)
            reports.append((task.name, report))
        return reports

    def start(self) -> SyncLoop:
        if self._tasks:
            self._thread = threading.Thread(target=self._loop, name="ferry-control", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for close in self._closers:
            close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for task in self._tasks:
                if self._stop.is_set() or now < task.due:
                    continue
                task.due = now + task.interval
                try:
                    self._report(task, task.action())
                except KafkaUnavailableError as exc:
                    # Said once per outage: heartbeats alone try every second.
                    self.failures += 1
                    task.down = exc.cluster
                    line = self._reach.failed(exc, task.name)
                    if line is not None:
                        self._notice(line)
                except FerryError as exc:
                    self.failures += 1
                    self._notice(f"{task.name}: {exc}; trying again in {task.interval:.0f}s")
                except Exception as exc:  # a bug must not end the thread silently
                    self.failures += 1
                    self._notice(f"{task.name} failed: {type(exc).__name__}: {exc}")
            self._stop.wait(0.5)

    def _report(self, task: _Task, report: SyncReport) -> None:
        if task.down is not None:
            line = self._reach.answered(task.down)
            if line is not None:
                self._notice(line)
            task.down = None
        for why in report.skipped:
            self._notice(f"{task.name}: {why}")


def _timestamps_mirror(config: FerryConfig, flow: FlowConfig) -> TimestampMirror:
    """Copies the source's `__consumer_timestamps` (written by applications that use
    `ferry.offsets.consumer_timestamps.ConsumerTimestampsRecorder`) into the target, so that
    `ferry failover group --by-timestamp` still works once the source is lost."""
    policy = flow.replication_policy
    return TimestampMirror(
        quiet(config.clusters[flow.source].admin_config()),
        quiet(config.clusters[flow.target].admin_config()),
        policy.consumer_timestamps_topic(flow.source),
        replication_factor=flow.checkpoints_topic_replication_factor,
    )


def _mirror_timestamps(mirror: TimestampMirror, source: ClusterConfig) -> SyncReport:
    try:
        return SyncReport(0, mirror.sync())
    except TimeoutError as exc:
        raise KafkaUnavailableError(source.alias, source.bootstrap_servers, str(exc)) from None
