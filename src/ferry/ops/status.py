"""`ferry status`: per flow, heartbeat latency, lag per partition and what was copied.

Latency is now minus the newest heartbeat of the source found in its remote heartbeats topic
on the target (`A.heartbeats` on B): it covers emitting, copying and the trigger interval, so
it grows while a flow is stopped even when no application writes. Lag is the source's last
stable offset minus the position ferry committed (the flow's `stats.json`), per partition.
A cluster that does not answer leaves its figures null and says why; the rest is reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from confluent_kafka import (
    IsolationLevel,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState, tp_key
from ferry.errors import FerryError
from ferry.kafka import clients
from ferry.kafka.errors import unavailable
from ferry.kafka.mm2_records import Heartbeat, MM2FormatError
from ferry.kafka.topic_reader import TopicTail
from ferry.policy import policy_for
from ferry.selection import TopicSelector

__all__ = [
    "FlowStatus",
    "PartitionStatus",
    "flow_status",
    "newest_heartbeat",
    "partition_statuses",
]

HEARTBEATS_READ_BACK = 50  # records read from the end: a few per flow out of the source


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    source_end: int
    replicated: int
    lag: int


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    latency_ms: int | None
    records: int
    bytes: int
    lag: int | None
    partitions: list[PartitionStatus] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["flow"]
        return data


def newest_heartbeat(
    records: Iterable[tuple[bytes | None, bytes | None]], source_alias: str
) -> int | None:
    """Newest timestamp among the heartbeats emitted for flows out of `source_alias`.

    Any flow out of the source counts (A->C's beats reach B through A->B too): each says A's
    records of that moment have arrived. Records that are not heartbeats are ignored.
    """
    newest: int | None = None
    for key, value in records:
        if key is None or value is None:
            continue
        try:
            beat = Heartbeat.from_bytes(key, value)
        except MM2FormatError:
            continue
        if beat.source_alias == source_alias and (newest is None or beat.timestamp > newest):
            newest = beat.timestamp
    return newest


def partition_statuses(
    ends: dict[tuple[str, int], int], stats: dict[str, Any]
) -> list[PartitionStatus]:
    """Lag of each source partition against ferry's committed position (0 if never copied)."""
    per = stats.get("partitions", {})
    rows = []
    for (topic, partition), end in sorted(ends.items()):
        replicated = int(per.get(tp_key(topic, partition), {}).get("position", 0))
        rows.append(PartitionStatus(topic, partition, end, replicated, max(0, end - replicated)))
    return rows


def flow_status(
    config: FerryConfig,
    flow: FlowConfig,
    *,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> FlowStatus:
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    policy = policy_for(flow.policy, flow.source)
    stats = FlowState(flow_state_dir(config.state_dir.resolve(), flow)).stats()
    errors: list[str] = []
    latency: int | None = None
    remote = policy.remote_topic(flow.source, policy.heartbeats_topic())
    try:
        newest = newest_heartbeat(_read_tail(target, remote, timeout), flow.source)
        if newest is not None:
            latency = max(0, int(clock() * 1000) - newest)
    except FerryError as exc:
        errors.append(str(exc))
    partitions: list[PartitionStatus] = []
    lag: int | None = None
    try:
        ends = _source_ends(source, TopicSelector(flow, policy), timeout)
        partitions = partition_statuses(ends, stats)
        lag = sum(p.lag for p in partitions)
    except FerryError as exc:
        errors.append(str(exc))
    return FlowStatus(
        flow.name,
        latency,
        int(stats.get("records", 0)),
        int(stats.get("bytes", 0)),
        lag,
        partitions,
        errors,
    )


def _source_ends(
    cluster: ClusterConfig, selector: TopicSelector, timeout: float
) -> dict[tuple[str, int], int]:
    admin = clients.admin_client(cluster.admin_config())
    try:
        topics = admin.list_topics(timeout=timeout).topics
    except KafkaException as exc:
        raise unavailable(cluster, exc) from None
    request = {
        TopicPartition(name, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]
        for name, md in topics.items()
        if md.error is None and selector.accepts(name)
        for p in md.partitions
    }
    if not request:
        return {}
    futures = admin.list_offsets(
        request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout
    )
    ends: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            ends[(tp.topic, tp.partition)] = int(future.result().offset)
        except KafkaException as exc:
            raise unavailable(cluster, exc) from None
    return ends


def _read_tail(
    cluster: ClusterConfig, topic: str, timeout: float
) -> list[tuple[bytes | None, bytes | None]]:
    """The last few records of partition 0 of `topic`; [] if it does not exist (yet)."""
    tail = TopicTail(cluster, topic, timeout=timeout)
    try:
        return tail.read_last(HEARTBEATS_READ_BACK)
    finally:
        tail.close()
