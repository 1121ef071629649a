"""Checkpoints and group offset sync for one flow, one tick at a time.

`emit_checkpoints()`: for every source group the flow selects (`groups`, `groups.exclude`),
read its committed offsets on the source (only of the partitions it committed in, as the
source's `__consumer_offsets` says when ferry may read it), translate them exactly through the
flow's runs, and publish the changed ones as MM2 checkpoints in the target's
`<source>.checkpoints.internal`.
Published checkpoints are read back first (after a restart too), so they never move back
unless the source group itself rewound (`ferry.offsets.rules.should_emit`).

`sync_groups()`: with `sync.group.offsets.enabled`, commit the checkpointed offsets on the
target for groups that are idle there, never moving a target offset back (MM2's KIP-545).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ferry.config.model import FerryConfig, FlowConfig
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.mm2_records import Checkpoint
from ferry.kafka.offsets_log_reader import OffsetsLogIndex
from ferry.offsets.groups import GroupActiveError, GroupAdmin, group_filter
from ferry.offsets.rules import offsets_to_sync, should_emit
from ferry.offsets.runs_and_checkpoints import CheckpointStore, RunsStore
from ferry.offsets.translation import forward_positions

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = ["CheckpointEmitter", "SyncReport"]


@dataclass(frozen=True)
class SyncReport:
    groups: int = 0  # groups looked at
    checkpoints: int = 0  # checkpoints published, or group partitions committed
    skipped: tuple[str, ...] = ()  # why some groups were left alone


class CheckpointEmitter:
    def __init__(
        self,
        config: FerryConfig,
        flow: FlowConfig,
        *,
        timeout: float = 10.0,
        control: Callable[[], FlowControl] | None = None,
    ) -> None:
        """`control`: the flow's runtime override (ferry.control), read at every tick, so a
        topic added over the API is checkpointed like one the file names."""
        self.flow = flow
        self._control = control
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.replication_policy
        self.selector = TopicSelector(flow, self.policy)
        self.accepts_group = group_filter(flow)
        self.runs = RunsStore(self.target, self.policy.offset_runs_topic(flow.source), flow.source)
        self.checkpoints = CheckpointStore(self.target, self.policy.checkpoints_topic(flow.source))
        # Which partitions each group committed in on the source, followed from pass to pass
        # (what was written since): each group is asked for those alone.
        self.source_commits = OffsetsLogIndex(self.source, timeout=max(timeout, 30.0))
        self.source_groups = GroupAdmin(self.source, timeout=timeout, commits=self.source_commits)
        self.target_groups = GroupAdmin(self.target, timeout=timeout)
        self._timeout = timeout
        self._producer: Producer | None = None
        self._loaded = False

    def close(self) -> None:
        self.runs.close()
        self.checkpoints.close()
        self.source_commits.close()
        if self._producer is not None:
            self._producer.flush(self._timeout)
            self._producer = None

    # --- checkpoints ----------------------------------------------------------------------

    def emit_checkpoints(self) -> SyncReport:
        if not self._loaded:
            self.checkpoints.refresh()  # what earlier runs published: the monotonic floor
            self._loaded = True
        self.runs.refresh()
        on_target = self._partitions_on_target()
        # Groups checkpointed before count too: Kafka 4 does not list a group whose offsets
        # were only ever set through the admin API (as `ferry failover` sets them).
        listed = set(self.source_groups.groups()) | set(self.checkpoints.groups())
        groups = sorted(g for g in listed if self.accepts_group(g))
        if self._control is not None:
            self.selector = TopicSelector(self.flow, self.policy, self._control())
        fresh: list[Checkpoint] = []
        wanted = self._checkpointable(on_target) if groups else []
        if groups:
            self.source_commits.refresh()  # unusable: every group asked for every partition
        for group in groups:
            # Only the partitions a checkpoint can be written for, listed once per pass: a
            # metadata read and every partition of the cluster per group made a pass over
            # 1,000 groups and 10,000 partitions last 18 minutes.
            committed = self.source_groups.committed(group, wanted)
            positions = forward_positions(
                committed, self.selector.accepts, self.policy, self.flow.source, self.runs
            )
            for p in positions:
                if p.partition >= on_target.get(p.target_topic, 0):
                    continue  # not copied yet: nothing a consumer could read there
                previous = self.checkpoints.latest(group, p.target_topic, p.partition)
                if should_emit(previous, p.committed, p.offset):
                    fresh.append(
                        Checkpoint(group, p.target_topic, p.partition, p.committed, p.offset)
                    )
        self._publish(fresh)
        return SyncReport(len(groups), len(fresh))

    def _checkpointable(self, on_target: dict[str, int]) -> list[tuple[str, int]]:
        """The source partitions the flow replicates (its selector, now) that exist on the
        target: the only ones a checkpoint is written for."""
        with kafka_errors(self.source, "list topics"):
            topics = self.source_groups.list_topics()
        return [
            (name, p)
            for name, md in sorted(topics.items())
            if md.error is None and not name.startswith("__") and self.selector.accepts(name)
            for p in sorted(md.partitions)
            if p < on_target.get(self.policy.remote_topic(self.flow.source, name), 0)
        ]

    def _partitions_on_target(self) -> dict[str, int]:
        with kafka_errors(self.target, "list topics"):
            topics = self.target_groups.list_topics()
        return {name: len(md.partitions) for name, md in topics.items() if md.error is None}

    def _publish(self, checkpoints: list[Checkpoint]) -> None:
        if not checkpoints:
            return
        if self._producer is None:
            self._producer = clients.producer(self.target.producer_config())
        failures: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(f"{err.name()}: {err.str()}")

        topic = self.checkpoints.topic
        for c in checkpoints:
            self._producer.produce(topic, c.value_bytes(), c.key_bytes(), on_delivery=on_delivery)
        left = self._producer.flush(self._timeout)
        if left:
            raise KafkaUnavailableError(
                self.target.alias,
                self.target.bootstrap_servers,
                f"{left} checkpoint(s) not acknowledged within {self._timeout:.0f}s",
            )
        if failures:
            raise ReplicationError(
                f"could not write {len(failures)} checkpoint(s): {failures[0]}.",
                cluster=self.target.alias,
                topic=topic,
                partition=0,
                fix="check that ferry may write to this topic",
            )
        for c in checkpoints:
            self.checkpoints.remember(c)

    # --- group offset sync ----------------------------------------------------------------

    def sync_groups(self) -> SyncReport:
        """Commit checkpointed offsets on the target for idle groups (call after emitting)."""
        if not self._loaded:
            self.checkpoints.refresh()
            self._loaded = True
        committed = 0
        skipped: list[str] = []
        groups = [g for g in self.checkpoints.groups() if self.accepts_group(g)]
        for group in groups:
            checkpoints = self.checkpoints.of_group(group)
            translated = {(c.topic, c.partition): c.offset for c in checkpoints}
            offsets = offsets_to_sync(False, self.target_groups.committed(group), translated)
            try:
                # No separate check for members first: the coordinator itself refuses a commit
                # from outside a group that has members, in the same step (nothing between a
                # check and the commit), and no admin request to a coordinator is sent from
                # this long-running process (kafka/group_offsets.py says why).
                self.target_groups.commit(group, offsets)
            except GroupActiveError:
                skipped.append(
                    f"group {group} has active member(s) on {self.flow.target}; its offsets "
                    "there are left alone"
                )
                continue
            except KafkaUnavailableError:
                raise
            except FerryError as exc:
                skipped.append(str(exc))
                continue
            committed += len(offsets)
        return SyncReport(len(groups), committed, tuple(skipped))
