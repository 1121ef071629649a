"""`ferry reconcile`: after an unplanned failover from A to B, the records A took that B never
got (the stranded tail), read once A is back. Writing them is `ferry.ops.reconcile_writes`.

The flow's last replicated position per source partition is what B holds: the flow's
progress on B (group `ferry-A-to-B`, the position `ferry status` and failover read), or the end
of its offset runs on B where those reach further (runs are written from delivery reports
before the position, so a copy whose position commit was lost is still on B). The rule is
`ferry.offsets.stranded`; `plan_reconcile` reads its inputs: positions on B, A's log bounds,
then A (read_committed) from the last replicated record of each partition to its end:
offsets, timestamps and origin headers only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, TopicPartition

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import ReplicationError
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.partition_offsets import log_bounds as read_log_bounds
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.kafka.retry import retry_unavailable
from ferry.offsets.groups import GroupAdmin
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.offsets.stranded import (
    LogTail,
    RecoveryPoint,
    SeenRecord,
    StrandedPartition,
    recovery_point,
    stranded_partition,
)

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = [
    "ReconcilePlan",
    "log_bounds",
    "origin_of",
    "plan_reconcile",
    "read_ranges",
    "stranded_records",
]

TP = tuple[str, int]


@dataclass
class ReconcilePlan:
    flow: FlowConfig
    source: ClusterConfig
    target: ClusterConfig
    source_cluster_id: str
    target_cluster_id: str
    remote: dict[str, str]  # source topic -> its remote topic on B
    partitions: list[StrandedPartition]
    position_from: dict[TP, str]  # "progress", "runs" or "none" (nothing of it on B)
    point: RecoveryPoint

    @property
    def stranded(self) -> int:
        return sum(p.count for p in self.partitions)

    def with_stranded(self) -> list[StrandedPartition]:
        return [p for p in self.partitions if p.count]

    def as_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow.name,
            "source": self.flow.source,
            "target": self.flow.target,
            "stranded": self.stranded,
            "partitions": [
                {
                    **p.as_json(),
                    "remote_topic": self.remote[p.topic],
                    "position_from": self.position_from[(p.topic, p.partition)],
                }
                for p in self.partitions
            ],
            "recovery_point": self.point.as_json(),
        }


def plan_reconcile(
    config: FerryConfig, flow: FlowConfig, *, timeout: float = 10.0
) -> ReconcilePlan:
    """Read what B holds of `flow`, then what A holds after it (see the module doc)."""
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy)
    source_admin = clients.admin_client(source.admin_config())
    with kafka_errors(source, "list topics"):
        source_md = source_admin.list_topics(timeout=timeout)
    target_id = _cluster_id(target, timeout)
    topics = sorted(
        name
        for name, md in source_md.topics.items()
        if md.error is None and selector.accepts(name) and not policy.is_heartbeats_topic(name)
    )
    partitions = [(t, p) for t in topics for p in sorted(source_md.topics[t].partitions)]
    remote = {t: policy.remote_topic(flow.source, t) for t in topics}
    progress = GroupAdmin(target, timeout=timeout).committed(flow.progress_group)
    runs = RunsStore(target, policy.offset_runs_topic(flow.source), flow.source, timeout=timeout)
    try:
        runs.refresh()
        ends_of_runs = {tp: runs.index(*tp).replicated_end() for tp in partitions}
    finally:
        runs.close()
    positions: dict[TP, int | None] = {}
    position_from: dict[TP, str] = {}
    read_from: dict[TP, int] = {}
    for topic, p in partitions:
        committed = progress.get((remote[topic], p))
        copied = ends_of_runs[(topic, p)]
        if committed is None and copied is None:
            positions[(topic, p)], position_from[(topic, p)] = None, "none"
        elif copied is not None and (committed is None or copied > committed):
            positions[(topic, p)], position_from[(topic, p)] = copied, "runs"
        else:
            positions[(topic, p)], position_from[(topic, p)] = committed, "progress"
        # From the last replicated record: its timestamp is when B last heard of the partition.
        starts = [x for x in (positions[(topic, p)], copied and copied - 1) if x is not None]
        read_from[(topic, p)] = min(starts, default=0)
    bounds = log_bounds(source, source_admin, partitions, timeout)
    wanted = {
        tp: (max(read_from[tp], low), high)
        for tp, (low, high) in bounds.items()
        if max(read_from[tp], low) < high
    }
    seen: dict[TP, list[SeenRecord]] = {tp: [] for tp in partitions}
    for message in read_ranges(source, wanted, timeout):
        seen[(message.topic(), message.partition())].append(
            SeenRecord(message.offset(), _timestamp(message), origin_of(message))
        )
    found = [
        stranded_partition(
            LogTail(t, p, positions[(t, p)], bounds[(t, p)][0], bounds[(t, p)][1], seen[(t, p)]),
            target_id,
        )
        for t, p in partitions
    ]
    return ReconcilePlan(
        flow,
        source,
        target,
        str(source_md.cluster_id),
        target_id,
        remote,
        found,
        position_from,
        recovery_point(found),
    )


def read_ranges(
    cluster: ClusterConfig, wanted: dict[TP, tuple[int, int]], timeout: float
) -> Iterator[Any]:
    """Every real record of each partition's [first, end), in offset order per partition
    (read_committed: no aborted records, no transaction markers). Fails, naming the partition
    and offset, when a partition gives nothing for `timeout` seconds."""
    pending = {tp: first for tp, (first, end) in wanted.items() if first < end}
    if not pending:
        return
    consumer = clients.consumer(
        {
            **cluster.consumer_config(),
            "group.id": f"ferry-reconcile-{uuid.uuid4().hex[:8]}",
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    try:
        with kafka_errors(cluster, "read the stranded records"):
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in pending.items()])
        heard = time.monotonic()
        while pending:
            messages = consumer.consume(500, 0.5)
            if messages:
                heard = time.monotonic()
            elif time.monotonic() - heard > timeout:
                (topic, partition), offset = min(pending.items())
                raise ReplicationError(
                    f"nothing could be read for {timeout:g} s "
                    f"(the end is {wanted[(topic, partition)][1]}).",
                    cluster=cluster.alias,
                    topic=topic,
                    partition=partition,
                    offset=offset,
                    fix="check that the cluster answers and ferry may read the topic; rerun",
                )
            for message in messages:
                tp = (str(message.topic()), int(message.partition() or 0))
                if tp not in pending:
                    continue
                end = wanted[tp][1]
                offset = int(message.offset() or 0)
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if offset >= end:
                            _done(consumer, pending, tp)
                        continue
                    raise ReplicationError(
                        f"could not read: {error.name()}: {error.str()}.",
                        cluster=cluster.alias,
                        topic=tp[0],
                        partition=tp[1],
                        offset=pending[tp],
                    )
                if offset >= end:
                    _done(consumer, pending, tp)
                    continue
                pending[tp] = offset + 1
                yield message
                if offset >= end - 1:
                    _done(consumer, pending, tp)
    finally:
        consumer.close()


def log_bounds(
    cluster: ClusterConfig, admin: Any, partitions: list[TP], timeout: float
) -> dict[TP, tuple[int, int]]:
    """(log start, last stable offset) of each partition. A partition without a leader yet
    (a topic just created) or a broker that does not answer is asked again for up to
    `timeout` seconds before the error is raised."""
    if not partitions:
        return {}
    return retry_unavailable(
        lambda: _log_bounds(cluster, admin, partitions, timeout),
        on_retry=lambda error, delay: None,
        sleep=time.sleep,
        max_wait=timeout,
        first_delay=0.2,
    )


def _log_bounds(
    cluster: ClusterConfig, admin: Any, partitions: list[TP], timeout: float
) -> dict[TP, tuple[int, int]]:
    return read_log_bounds(cluster, admin, partitions, timeout=timeout)


def _done(consumer: Consumer, pending: dict[TP, int], tp: TP) -> None:
    pending.pop(tp, None)
    consumer.incremental_unassign([TopicPartition(*tp)])


def _timestamp(message: Any) -> int | None:
    kind, ts = message.timestamp()
    return int(ts) if kind != 0 and ts >= 0 else None  # 0: TIMESTAMP_NOT_AVAILABLE


def origin_of(message: Any) -> Origin | None:
    for name, value in message.headers() or ():
        if name == ORIGIN_HEADER and value is not None:
            try:
                return Origin.from_bytes(value)
            except (ValueError, UnicodeDecodeError):
                return None
    return None


def _cluster_id(cluster: ClusterConfig, timeout: float) -> str:
    admin = clients.admin_client(cluster.admin_config())
    with kafka_errors(cluster, "read the cluster's id"):
        return str(admin.list_topics(timeout=timeout).cluster_id)


def stranded_records(plan: ReconcilePlan, timeout: float) -> Iterator[Any]:
    """The stranded records again, with keys and values, as the plan found them."""
    wanted = {
        (p.topic, p.partition): (p.ranges[0].first, p.ranges[-1].last + 1)
        for p in plan.with_stranded()
    }
    for message in read_ranges(plan.source, wanted, timeout):
        origin = origin_of(message)
        if origin is not None and origin.cluster_id == plan.target_cluster_id:
            continue  # came from B: B has it (the same rule as the plan's)
        yield message
