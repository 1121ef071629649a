"""`ferry status`: per flow, heartbeat latency, lag per partition and what was copied.

Everything that says where replication stands is read from the clusters, so the answer is the
same on any machine: the replicated position of a source partition is the flow's progress on
the target (the next source offset, committed as the remote partition's offset in group
`ferry-<source>-to-<target>` once the target acknowledged the copies; both modes commit it),
or, for a partition with no progress there yet, the end of its exact offset runs. Lag is the
source's last stable offset minus that position. The recovery point objective (RPO) of a
lagging partition is the age of the first real record at or after that position, read from the
source (`ferry.flows.rpo`: the rule; `ferry.kafka.rpo_probe`: one record per lagging partition,
one consumer, a few seconds at most; what does not answer in time is unknown, never 0); the
flow's is its worst partition's. Latency is now minus the newest heartbeat of
the source found in its remote heartbeats topic on the target (`A.heartbeats` on B); a flow
that emits no heartbeats (a read-only source) shows instead the mean latency of its latest
copies (target ack time minus source timestamp) as `ferry run` measured them. Records
and bytes are what `ferry run` counted on this machine (its state directory), and so are the
records the source removed (retention, DeleteRecords) before ferry copied them, per partition
with their offsets: a gap on the target no copy can fill.
A cluster that does not answer leaves its figures null and says why (if it answers metadata,
which partitions are below min.insync.replicas or leaderless: `ferry.ops.cluster_health`); the
rest is reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.executors import held_partitions
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState, lost_ranges, tp_key
from ferry.errors import FerryError
from ferry.flows.rpo import flow_rpo
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.mm2_records import Heartbeat, MM2FormatError
from ferry.kafka.partition_offsets import read_ends
from ferry.kafka.rpo_probe import DEFAULT_TIMEOUT, read_rpos
from ferry.kafka.topic_reader import TopicTail
from ferry.offsets.groups import GroupAdmin
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.ops.cluster_health import DIAGNOSIS_SECONDS, Explainer, diagnose

__all__ = [
    "FlowStatus",
    "PartitionStatus",
    "flow_status",
    "newest_heartbeat",
    "partition_statuses",
    "read_flow_rpos",
    "replicated_positions",
]

TP = tuple[str, int]
HEARTBEATS_READ_BACK = 50  # records read from the end: a few per flow out of the source
RPO_READ_SECONDS = DEFAULT_TIMEOUT  # at most, for the first records of lagging partitions


@dataclass(frozen=True)
class PartitionStatus:
    topic: str
    partition: int
    source_end: int
    replicated: int
    lag: int
    # Age in seconds of the oldest source record not on the target; None: not known.
    rpo_seconds: float | None = None
    # Records the source removed (retention, DeleteRecords) before ferry copied them, and
    # their offsets ("100..149, 300..310"), as this machine's `ferry run` counted them.
    lost: int = 0
    lost_offsets: str = ""
    # Why the copy holds at `replicated` ("": it does not): a schema registry that does not
    # answer for the next record's schema id; from the running lease's latest report.
    held: str = ""


@dataclass(frozen=True)
class FlowStatus:
    flow: str
    latency_ms: int | None
    records: int
    bytes: int
    lag: int | None
    partitions: list[PartitionStatus] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Which Spark executor copies which partitions, how fast (this machine's `ferry run`).
    executors: dict[str, dict[str, Any]] = field(default_factory=dict)
    spark_ui: str | None = None
    rpo_seconds: float | None = None  # the worst partition's; None if any is not known
    lost: int = 0  # records removed from the source before ferry copied them (this machine)
    # What latency_ms is: "heartbeats" (now minus the newest heartbeat copied to the target),
    # "copies" (no heartbeats: the mean ack-minus-source-timestamp of the latest copies, as
    # this machine's `ferry run` measured them), None (not known).
    latency_from: str | None = None

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
    ends: dict[TP, int],
    replicated: dict[TP, int],
    rpos: Mapping[TP, float | None] | None = None,
    counters: Mapping[str, dict[str, Any]] | None = None,
    held: Mapping[TP, str] | None = None,
) -> list[PartitionStatus]:
    """Lag of each source partition against its replicated position (0 if never copied), its
    RPO when `rpos` has it, the records it lost before copy when `counters` (the flow's
    stats by partition) say so, and why it holds when `held` says."""
    rows = []
    for (topic, partition), end in sorted(ends.items()):
        position = replicated.get((topic, partition), 0)
        rpo = (rpos or {}).get((topic, partition))
        entry = (counters or {}).get(tp_key(topic, partition), {})
        rows.append(
            PartitionStatus(
                topic,
                partition,
                end,
                position,
                max(0, end - position),
                rpo,
                int(entry.get("expired", 0)),
                lost_ranges(entry),
                (held or {}).get((topic, partition), ""),
            )
        )
    return rows


def replicated_positions(
    target: ClusterConfig, flow: FlowConfig, partitions: Iterable[TP], timeout: float
) -> dict[TP, int]:
    """Where each source partition stands on the target: the flow's progress, else the end
    of its offset runs (a flow last run before progress was committed in both modes)."""
    policy = flow.replication_policy
    progress = GroupAdmin(target, timeout=timeout).committed(flow.progress_group)
    positions: dict[TP, int] = {}
    missing: list[TP] = []
    for topic, partition in partitions:
        remote = (policy.remote_topic(flow.source, topic), partition)
        if remote in progress:
            positions[(topic, partition)] = progress[remote]
        else:
            missing.append((topic, partition))
    if missing:
        runs = RunsStore(
            target, policy.offset_runs_topic(flow.source), flow.source, timeout=timeout
        )
        try:
            runs.refresh()
            for topic, partition in missing:
                end = runs.index(topic, partition).replicated_end()
                if end is not None:
                    positions[(topic, partition)] = end
        finally:
            runs.close()
    return positions


def flow_status(
    config: FerryConfig,
    flow: FlowConfig,
    *,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> FlowStatus:
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    policy = flow.replication_policy
    # Counters only: what `ferry run` on this machine counted (its state directory).
    state = FlowState(flow_state_dir(config.state_dir.resolve(), flow))
    stats = state.stats()
    errors: list[str] = []
    # An unavailable cluster that still answers metadata: say which partitions make it wait.
    explain = Explainer((source, target), min(timeout, DIAGNOSIS_SECONDS)).lines
    latency: int | None = None
    remote = policy.remote_topic(flow.source, policy.heartbeats_topic())
    try:
        newest = newest_heartbeat(_read_tail(target, remote, timeout), flow.source)
        if newest is not None:
            latency = max(0, int(clock() * 1000) - newest)
    except FerryError as exc:
        errors.extend(explain(exc))
    latency_from = "heartbeats" if latency is not None else None
    if latency is None and not flow.emit_heartbeats_enabled:
        # No heartbeats (a read-only source): the copies' own latency, as ferry run measured it.
        latency = state.recent_latency_ms()
        latency_from = "copies" if latency is not None else None
    partitions: list[PartitionStatus] = []
    lag: int | None = None
    rpo: float | None = None
    try:
        ends = _source_ends(source, TopicSelector(flow, policy), timeout)
        positions = replicated_positions(target, flow, ends, timeout)
        rpos = read_rpos(
            source, positions, ends, timeout=min(timeout, RPO_READ_SECONDS), clock=clock
        )
        held = held_partitions(state.unabsorbed_tasks(stats))
        partitions = partition_statuses(ends, positions, rpos, stats.get("partitions", {}), held)
        # A held partition waits for a schema registry, not for a cluster: said, with why.
        errors.extend(why for _tp, why in sorted(held.items()))
        lag = sum(p.lag for p in partitions)
        rpo = flow_rpo(rpos.values())
    except FerryError as exc:
        errors.extend(explain(exc))
    if lag and not errors:
        # Behind while both answer: a target whose partitions cannot take acks=all writes
        # (below min.insync.replicas, leaderless, brokers gone with the controller quorum)
        # still serves these reads, so only its health says why the copy waits.
        found = diagnose(target, min(timeout, DIAGNOSIS_SECONDS))
        if found is not None:
            errors.append(found)
    return FlowStatus(
        flow.name,
        latency,
        int(stats.get("records", 0)),
        int(stats.get("bytes", 0)),
        lag,
        partitions,
        errors,
        {name: e.to_json() for name, e in state.executors(clock()).items()},
        state.spark_ui(),
        rpo,
        int(stats.get("expired", 0)),
        latency_from,
    )


def read_flow_rpos(
    config: FerryConfig,
    flow: FlowConfig,
    *,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
) -> dict[TP, float | None]:
    """The RPO in seconds of each source partition `flow` replicates, as `ferry status` reads
    it (None: not known); KafkaUnavailableError if a cluster does not answer."""
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    ends = _source_ends(source, TopicSelector(flow, flow.replication_policy), timeout)
    positions = replicated_positions(target, flow, ends, timeout)
    return read_rpos(source, positions, ends, timeout=min(timeout, RPO_READ_SECONDS), clock=clock)


def _source_ends(
    cluster: ClusterConfig, selector: TopicSelector, timeout: float
) -> dict[tuple[str, int], int]:
    admin = clients.admin_client(cluster.admin_config())
    with kafka_errors(cluster, "list topics"):
        topics = admin.list_topics(timeout=timeout).topics
    partitions = [
        (name, p)
        for name, md in topics.items()
        if md.error is None and selector.accepts(name)
        for p in md.partitions
    ]
    return read_ends(cluster, admin, partitions, timeout=timeout)


def _read_tail(
    cluster: ClusterConfig, topic: str, timeout: float
) -> list[tuple[bytes | None, bytes | None]]:
    """The last few records of partition 0 of `topic`; [] if it does not exist (yet)."""
    tail = TopicTail(cluster, topic, timeout=timeout)
    try:
        return tail.read_last(HEARTBEATS_READ_BACK)
    finally:
        tail.close()
