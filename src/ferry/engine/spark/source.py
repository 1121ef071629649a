"""The planner: a PySpark streaming source whose offsets are Kafka positions, not records.

Two modes. **Leases** (continuous `ferry run`, `ferry.lease.seconds` > 0): the offset is
`{"lease": n, "topics": {topic: partitions}}`; every micro-batch is a lease in which each task
copies its bin of partitions continuously from the flow's position on the target
(engine/copy/lease.py). The planner only decides who copies what: every partition of every
selected topic, packed into one bin per core, weighted by what each partition carried in the
last lease plus its lag (read against the flow's position on the target, so it is known from
the first lease on), and sticky across leases. New topics and partitions (found every
`refresh.topics.interval.seconds`, or at once when the API changes the flow's topics) join at
the next lease; a paused flow (ferry.control) gets no lease until it resumes.

**Bounded micro-batches** (`--once`, or `ferry.lease.seconds = 0`): the offset is
`{topic: {partition: next offset}}` on the source cluster. Each micro-batch it
reads the last stable offsets (read_committed: open transactions are not planned), cuts the
batch to the configured caps, and packs the ranges into a few bins; a bin is one Spark task
and reaches the sink as a handful of rows describing ranges. The records themselves never
become rows: the sink task fetches and produces them with librdkafka.

Remote topics are created (or expanded) here, before the first batch that includes them, so
no task can ever produce to a topic that is not ready.

Before a plan (every lease; bounded batches at most every `refresh.topics.interval.seconds`)
the planner compares each source topic's id with the id committed beside the flow's position
(engine/plan/topic_ids.py): a topic deleted and created again has its position set back to 0
on the target, with the new id, and is copied from its start; the rows carry the ids, which
the tasks commit beside the positions.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState, tp_key
from ferry.engine.plan.batches import (
    TP,
    PartitionRange,
    admit,
    bin_count,
    bins_by_name,
    lease_bins,
    pack_bins,
    range_start,
)
from ferry.engine.plan.leases import lags, lease_rows, lease_weights, read_counters
from ferry.engine.plan.remote_topics import RemoteTopic, TopicManager
from ferry.engine.plan.topic_ids import (
    changed_partitions,
    ends_in_new_topics,
    source_topic_ids,
)
from ferry.errors import FerryError, error_to_text
from ferry.offsets.groups import GroupAdmin

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["RANGE_FIELDS", "RANGE_SCHEMA", "MirrorDataSource", "Planner"]

RANGE_SCHEMA = (
    "topic string, partition int, start long, end long, remote_topic string, "
    "max_message_bytes long, source_cluster_id string, target_cluster_id string, log_end long, "
    "topic_id string"
)
RANGE_FIELDS = tuple(column.split()[0] for column in RANGE_SCHEMA.split(", "))
Offsets = dict[str, dict[str, int]]


def _flat(offsets: dict[str, Any]) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, parts in offsets.items() for p, o in parts.items()}


def _nested(offsets: dict[TP, int]) -> Offsets:
    nested: Offsets = {}
    for (topic, partition), offset in sorted(offsets.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def _by_topic(topic: RemoteTopic) -> str:
    return topic.topic


class BinPartition(InputPartition):
    """One Spark task: the ranges of one bin, as rows of RANGE_SCHEMA."""

    def __init__(self, index: int, rows: list[tuple[Any, ...]]) -> None:
        super().__init__(index)
        self.index = index
        self.rows = rows


class Planner(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: FlowSpec) -> None:
        self.spec = spec
        self.flow = spec.flow
        self.state = FlowState(spec.state_dir)
        self._manager: TopicManager | None = None
        self._topics: dict[str, RemoteTopic] = {}
        self._cluster_ids: tuple[str, str] | None = None
        self._next_refresh = 0.0
        self._available_now: dict[TP, int] | None = None
        self._previous_bins: dict[TP, int] = {}
        self._task_slots = 0  # the most bins this planner recorded (FlowState.task_slots)
        self._log_ends: dict[TP, int] = {}  # leases: the source's ends at the lease's planning
        self._carried: dict[TP, int] = {}  # leases: records per partition counted so far
        self._lease_lags: dict[TP, int] = {}  # leases: lag per partition at the lease's planning
        self._topic_ids: dict[str, str] = {}  # the source topics' ids, as last read
        self._next_id_check = 0.0  # bounded batches: when the ids are compared next
        self._source_admin: AdminClient | None = None

    # Only the driver-side methods touch Kafka; `read` runs on executors with none of this.
    def _topic_manager(self) -> TopicManager:
        if self._manager is None:
            self._manager = TopicManager(
                self.flow, self.spec.source, self.spec.target, control=self.state.selection_control
            )
        return self._manager

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_refresh:
            return
        manager = self._topic_manager()
        if self._cluster_ids is None:
            self._cluster_ids = manager.cluster_ids()
        self._topics = manager.sync()
        interval = self.flow.refresh_topics_interval_seconds
        self._next_refresh = now + interval if self.flow.refresh_topics_enabled else float("inf")

    def _refresh_for_plan(self) -> None:
        """The flow's topics, read again at once when they changed (the API, the graph: the
        replan marker) since the last plan. The marker is removed before the changed state
        is read, never after: a change recorded while this plan reads marks it again, so the
        lease about to start ends at once and the next plan has that change too. A read that
        fails puts the marker back for the next attempt."""
        marker = self.state.replan_marker
        changed = marker.exists()
        if changed:
            marker.unlink(missing_ok=True)
        try:
            self._refresh(force=changed)
        except BaseException:
            if changed:
                marker.touch()
            raise

    def _end_offsets(self, which: str) -> dict[TP, int]:
        topics = {t.topic: t.partitions for t in self._topics.values()}
        return self._topic_manager().end_offsets(topics, which)

    # --- DataSourceStreamReader -----------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        return {"lease": 0, "topics": {}} if self.spec.leased else {}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.flow.batch_caps[0])

    def prepareForTriggerAvailableNow(self) -> None:
        try:
            self._refresh(force=True)
            self._available_now = self._end_offsets("latest")
        except FerryError as exc:
            raise RuntimeError(error_to_text(exc)) from None

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        try:
            if self.spec.leased:
                return self._next_lease(start)
            return self._latest_offset(_flat(start), limit)
        except FerryError as exc:
            raise RuntimeError(error_to_text(exc)) from None

    def _latest_offset(self, start: dict[TP, int], limit: ReadLimit) -> dict[str, Any]:
        if self.state.stop_marker.exists() or self.state.control().paused:
            # Stopping: let the running batch be the last. Paused: no batch; the position
            # stays where the last one committed it.
            return _nested(start)
        if self._available_now is None:
            self._refresh_for_plan()
            latest = self._end_offsets("latest")
        else:
            latest = dict(self._available_now)
        self.state.write_latest({tp_key(*tp): o for tp, o in latest.items()})
        moved: dict[TP, int] = {}  # partitions of a re-created topic: where this batch ends
        if time.monotonic() >= self._next_id_check:
            self._next_id_check = time.monotonic() + self.flow.refresh_topics_interval_seconds
            committed = self._committed({t: r.partitions for t, r in self._topics.items()}) or {}
            moved = ends_in_new_topics(start, committed, self._topics_recreated(committed))
        # A partition seen for the first time starts at its earliest retained record; so does
        # one whose end fell below ferry's progress (its topic was deleted and recreated).
        new = [tp for tp in latest if tp not in start or latest[tp] < start[tp]]
        recreated = [tp for tp in new if tp in start and tp not in moved]
        for tp in recreated:
            self._notice(
                f"{tp[0]} partition {tp[1]} on {self.flow.source} ends at {latest[tp]}, "
                f"below ferry's position {start[tp]}: recreated? copying it from its start"
            )
        if recreated:  # the flow's position on the target points into the old topic
            policy = self._topic_manager().policy
            GroupAdmin(self.spec.target).commit(
                self.flow.progress_group,
                {(policy.remote_topic(self.flow.source, t), p): 0 for t, p in recreated},
            )
        begin = dict(start)
        if new:
            earliest = self._end_offsets("earliest")
            begin.update({tp: earliest.get(tp, 0) for tp in new})
        unlimited = isinstance(limit, ReadAllAvailable)
        max_records = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = admit(
            begin,
            latest,
            max_records=None if unlimited else (max_records or self.flow.batch_caps[0]),
            max_bytes=None if unlimited else self.flow.batch_caps[1],
            record_bytes=self.state.record_bytes(),
        )
        # A topic removed over the API leaves the plan (were it kept, every batch would look
        # for it); added again, it resumes from the flow's position on the target.
        removed = self.state.selection_control().removed
        result = {tp: offset for tp, offset in start.items() if tp[0] not in removed}
        for tp, end in ends.items():
            if end != begin[tp] or tp in start:
                result[tp] = end
        # A topic whose id changed: this batch moves its partitions' offsets into the new
        # topic and copies nothing of them (an end below the start is no range, one above it
        # is resumed at the position committed), the next one copies on from there. Batches
        # stay defined by their offsets alone, so a replay is the same.
        for tp, offset in moved.items():
            if tp in result:
                result[tp] = offset
        return _nested(result)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        try:
            if self.spec.leased:
                return self._lease_partitions(end)
            return self._partitions(_flat(start), _flat(end))
        except FerryError as exc:
            raise RuntimeError(error_to_text(exc)) from None

    def _partitions(self, start: dict[TP, int], end: dict[TP, int]) -> list[BinPartition]:
        missing = {t for (t, _p) in end if t not in self._topics}
        if missing or self._cluster_ids is None:
            self._refresh(force=True)  # a restarted query replays a batch planned earlier
        assert self._cluster_ids is not None
        source_id, target_id = self._cluster_ids
        manager = self._topic_manager()
        ranges = [
            PartitionRange(t, p, begin, e, manager.policy.remote_topic(self.flow.source, t))
            for (t, p), e in end.items()
            if (begin := range_start(start.get((t, p)), e)) is not None
        ]
        record_bytes = self.state.record_bytes()
        if self.flow.exactly_once:
            # By name, as many bins every batch, empty ones kept: every run agrees which
            # slot's transactional ids write a partition (plan.batches.bins_by_name).
            bins = self.flow.bins or self.spec.bins
            packed = bins_by_name(ranges, bins)
        else:
            # ferry.bins = 0: one bin per core, fewer for a small batch (see plan.bin_count).
            bins = self.flow.bins or bin_count(ranges, self.spec.bins, record_bytes=record_bytes)
            packed = pack_bins(
                ranges, bins, record_bytes=record_bytes, previous=self._previous_bins
            )
        partitions: list[BinPartition] = []
        for index, bin_ranges in enumerate(packed):
            rows = []
            for r in bin_ranges:
                self._previous_bins[r.tp] = index
                limit = (
                    self._topics[r.topic].max_message_bytes if r.topic in self._topics else 1048588
                )
                rows.append(
                    (
                        r.topic,
                        r.partition,
                        r.start,
                        r.end,
                        r.remote_topic,
                        limit,
                        source_id,
                        target_id,
                        r.end,
                        self._topic_ids.get(r.topic, ""),
                    )
                )
            if rows or self.flow.exactly_once:  # exactly-once: a bin's index is its slot
                partitions.append(BinPartition(len(partitions), rows))
        self._record_task_slots(len(partitions))
        return partitions

    # --- leases ---------------------------------------------------------------------------

    def _next_lease(self, start: dict[str, Any]) -> dict[str, Any]:
        if self.state.stop_marker.exists() or self.state.control().paused:
            return start  # stopping or paused (the running lease ends at the replan marker)
        self._refresh_for_plan()
        self._read_lease_offsets(write_latest=True)
        topics = {t.topic: t.partitions for t in sorted(self._topics.values(), key=_by_topic)}
        lease = int(start.get("lease", 0)) + 1
        self.state.write_lease(lease, topics, self._topic_ids)
        return {"lease": lease, "topics": topics}

    def _lease_partitions(self, end: dict[str, Any]) -> list[BinPartition]:
        topics: dict[str, int] = end.get("topics", {})
        if any(t not in self._topics for t in topics) or self._cluster_ids is None:
            self._refresh(force=True)  # a restarted query replays a lease planned earlier
        if not self._log_ends and topics:
            self._read_lease_offsets(write_latest=False)
        assert self._cluster_ids is not None
        policy, source = self._topic_manager().policy, self.flow.source
        counters = read_counters(self.state.stats().get("partitions", {}))
        weights = lease_weights(counters.records, self._carried, self._lease_lags)
        packed = lease_rows(
            topics,
            weights,
            lease_bins(self.flow.bins, self.spec.bins, self.state.slots()),
            remote_topic=lambda topic: policy.remote_topic(source, topic),
            max_message_bytes={t: r.max_message_bytes for t, r in self._topics.items()},
            log_ends=self._log_ends,
            cluster_ids=self._cluster_ids,
            record_bytes=counters.record_bytes,
            previous=self._previous_bins,
            topic_ids=self._topic_ids,
            by_name=self.flow.exactly_once,
        )
        self._record_task_slots(len(packed))
        return [BinPartition(index, rows) for index, rows in enumerate(packed)]

    def _record_task_slots(self, slots: int) -> None:
        """Exactly-once ids are per slot: the next run's start fences every slot used. Only
        a plan with more bins than this planner saw before reads and writes the state file."""
        if slots > self._task_slots:
            self._task_slots = slots
            self.state.record_task_slots(slots)

    def whole_flow(self) -> list[tuple[Any, ...]]:
        """Every partition of the flow from its position on, as rows of RANGE_SCHEMA: one
        lease's plan without Spark (the driver's head start, engine/head_start.py); none
        while the flow is paused."""
        if self.state.control().paused:
            return []
        self._refresh(force=True)
        self._read_lease_offsets(write_latest=False)
        topics = {t.topic: t.partitions for t in sorted(self._topics.values(), key=_by_topic)}
        return [row for part in self._lease_partitions({"topics": topics}) for row in part.rows]

    def _read_lease_offsets(self, *, write_latest: bool) -> None:
        """The source's ends and every partition's lag behind them, for a lease's planning:
        one read of each cluster, both at once (the flow's positions on the target are read
        in a thread while the source's requests are out). With 10,000 partitions each read
        is most of a plan's time."""
        topics = {t.topic: t.partitions for t in self._topics.values()}
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferry-positions") as pool:
            positions = pool.submit(self._committed, topics)
            self._log_ends = self._end_offsets("latest")
            committed = positions.result()
        answer = None
        if committed is not None:
            recreated = self._topics_recreated(committed)
            answer = {tp: 0 if tp in recreated else o for tp, (o, _id) in committed.items()}
        else:  # the lease is planned with its topics' ids all the same (the watch needs them)
            self._refresh_topic_ids()
        if write_latest:
            self.state.write_latest({tp_key(*tp): o for tp, o in self._log_ends.items()})
        if answer is None:  # placement falls back to this machine's counters, never fails
            self._lease_lags = {
                (topic, int(partition)): lag
                for key, lag in self.state.partition_lags().items()
                for topic, _, partition in [key.rpartition(":")]
            }
        else:
            self._lease_lags = lags(self._log_ends, answer)

    def _committed(self, topics: dict[str, int]) -> dict[TP, tuple[int, str]] | None:
        """The flow's position on the target of every partition of `topics` and the source
        topic id committed with it ("": none) (by source topic and partition; a partition never
        committed is left out), read the way a lease's task reads it (a consumer of the flow's
        group), where every run, on any machine, committed it. None when the target does not
        answer: placement is an estimate, never a reason to stop."""
        from ferry.engine.copy import worker_clients
        from ferry.engine.copy.client_settings import progress_consumer_settings
        from ferry.engine.copy.progress import topic_id_of
        from ferry.kafka.group_offsets import committed_in_batches

        source, policy = self.flow.source, self._topic_manager().policy
        remote = {t: policy.remote_topic(source, t) for t in topics}
        origin = {r: t for t, r in remote.items()}
        settings = progress_consumer_settings(self.spec.target, self.flow)
        request = [
            TopicPartition(remote[t], p) for t, n in sorted(topics.items()) for p in range(n)
        ]
        try:
            answer = committed_in_batches(worker_clients.consumer_for(settings), request, 10)
        except KafkaException:
            worker_clients.evict(settings, {})
            return None
        return {
            (origin[tp.topic], tp.partition): (tp.offset, topic_id_of(tp.metadata))
            for tp in answer
            if tp.error is None and tp.topic in origin and tp.offset >= 0
        }

    def _refresh_topic_ids(self) -> None:
        """The source topics' ids now, for the rows and the lease (a topic the source did not
        describe in time is left out: its id is not known)."""
        from ferry.kafka import clients

        if self._source_admin is None:
            self._source_admin = clients.admin_client(self.spec.source.admin_config())
        self._topic_ids = source_topic_ids(self._source_admin, self._topics, timeout=10)

    def _topics_recreated(self, committed: dict[TP, tuple[int, str]]) -> dict[TP, tuple[str, str]]:
        """The source topics' ids now (kept for the rows); the partitions whose position was
        committed with another id than their topic's now, set back to 0 on the target with the
        new id, said per topic, naming both ids and the partitions. A partition of the same
        topic already committed with the new id keeps its position: it is copying the new
        topic already, and setting it back would copy what it copied a second time."""
        from ferry.engine.copy import worker_clients
        from ferry.engine.copy.client_settings import progress_consumer_settings
        from ferry.engine.copy.progress import commit_positions

        self._refresh_topic_ids()
        changed = changed_partitions(committed, self._topic_ids)
        if not changed:
            return changed
        policy, source = self._topic_manager().policy, self.flow.source
        by_topic: dict[tuple[str, str, str], list[int]] = {}
        for (topic, partition), (old, new) in changed.items():
            by_topic.setdefault((topic, old, new), []).append(partition)
        positions, ids = {}, {}
        for (topic, old, new), partitions in by_topic.items():
            self._notice(
                f"topic {topic} on {source} was deleted and re-created: its topic id is {new}, "
                f"ferry's position in partition(s) {', '.join(map(str, partitions))} was in "
                f"{old}; copying them from the new topic's start"
            )
            remote = policy.remote_topic(source, topic)
            for p in partitions:
                positions[(remote, p)] = 0
                ids[(remote, p)] = new
        settings = progress_consumer_settings(self.spec.target, self.flow)
        try:
            commit_positions(
                worker_clients.consumer_for(settings), self.spec.target, positions, ids
            )
        except FerryError:
            worker_clients.evict(settings, {})
            raise
        return changed

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, BinPartition)
        yield from partition.rows

    def _notice(self, message: str) -> None:
        import sys

        line = f"flow {self.flow.name}: {message}"
        print(f"ferry: {line}", file=sys.stderr, flush=True)
        self.state.add_notice(line)  # for ferry run's console and events

    def commit(self, end: dict[str, Any]) -> None:
        pass  # progress is Spark's checkpoint; nothing is committed to the source cluster


class MirrorDataSource(DataSource):
    """`ferry-mirror`: the planner as a streaming source, the mirror sink as its writer."""

    @classmethod
    def name(cls) -> str:
        return "ferry-mirror"

    def schema(self) -> str:
        return RANGE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return Planner(FlowSpec.model_validate_json(self.options["spec"]))

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from ferry.engine.spark.sink import MirrorSink

        return MirrorSink(FlowSpec.model_validate_json(self.options["spec"]))
