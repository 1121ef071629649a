"""A flow's recovery point at failover: how much of the source's recent history the target lacks.

Source answering (`measured`): per topic, the age of the oldest record on the source that is
not on the target yet, read on the source at the flow's position (the next source offset its
progress group on the target holds, else the end of its offset runs); 0 when every partition
is caught up; unknown (never 0) for a topic whose first record not copied could not be read
in time. `ferry.flows.rpo`'s rule, as `ferry status` and `ferry monitor` apply it.

Source lost (`proven`): only the target can be read, and it cannot tell a partition that
lagged from one where nothing was written. What it proves, per partition, is the timestamp of
the last copy it holds: every record of that partition up to it is on the target. The oldest
of those over a topic (then over the flow) is `copied_until`: records written to the source
after it may be on the source only; before it, by record timestamps (which grow within a
partition unless producers set them), nothing is missing. An idle partition makes that point
older than the truth, never newer. The newest heartbeat of the source on the target is given
beside it: the flow was copying at that moment, which says nothing of a partition that lagged.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.flows.override import FlowControl
from ferry.flows.rpo import flow_rpo
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.log import quiet
from ferry.kafka.mm2_records import Heartbeat, MM2FormatError
from ferry.kafka.partition_offsets import read_offsets
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.kafka.rpo_probe import last_stable_offsets, read_rpos
from ferry.kafka.topic_reader import TopicTail
from ferry.offsets.groups import GroupAdmin
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.offsets.timestamp_clients import Deadline, read_partitions, reader
from ferry.policy import ReplicationPolicy

__all__ = ["RecoveryPoint", "TopicPoint", "measured", "proven"]

TP = tuple[str, int]
TAIL = 50  # records read back from a remote partition's end to find its last copy


@dataclass(frozen=True)
class TopicPoint:
    topic: str  # on the source
    age_seconds: float | None  # see RecoveryPoint.kind; None: nothing known
    offsets_behind: int | None = None  # measured only: source end minus the flow's position
    copied_until_ms: int | None = None  # proven only: the oldest partition's last copy
    uncopied: int = 0  # proven only: partitions with no copy (left out of copied_until)


@dataclass(frozen=True)
class RecoveryPoint:
    """`kind` "measured": `age_seconds` is the age of the oldest record not on the target yet
    (0: caught up). "proven": the age of `copied_until`, after which records written to the
    source may be on the source only. "unknown": `error` says why."""

    kind: str
    source: str
    target: str
    at_ms: int
    topics: list[TopicPoint] = field(default_factory=list)
    copied_until_ms: int | None = None
    newest_heartbeat_ms: int | None = None
    error: str | None = None

    @property
    def age_seconds(self) -> float | None:
        """The worst topic's; measured, None if any is unknown (it could be the worst)."""
        if self.kind == "measured":
            return flow_rpo(t.age_seconds for t in self.topics)
        ages = [t.age_seconds for t in self.topics if t.age_seconds is not None]
        return max(ages) if ages else None

    def statement(self) -> str:
        if self.kind == "measured":
            unknown = [t.topic for t in self.topics if t.age_seconds is None]
            if unknown:
                return (
                    f"the oldest record on {self.source} not yet on {self.target} could not "
                    f"be read in time in {', '.join(unknown)}: unknown there"
                )
            behind = [t for t in self.topics if t.age_seconds]
            if not behind:
                return f"every record on {self.source} is on {self.target} (caught up)"
            return (
                f"the oldest record on {self.source} not yet on {self.target} is "
                f"{self.age_seconds:.1f} s old"
            )
        if self.kind == "proven" and self.copied_until_ms is not None:
            uncopied = sum(t.uncopied for t in self.topics)
            return (
                f"records written to {self.source} after {_iso(self.copied_until_ms)} "
                f"({_age(self.at_ms, self.copied_until_ms):.1f} s ago) may be on "
                f"{self.source} only; {self.target} holds every record of each partition up "
                "to its last copy"
                + (
                    f" ({uncopied} partition(s) with no copy on {self.target} are not counted: "
                    "an empty partition and one never copied look the same from there)"
                    if uncopied
                    else ""
                )
            )
        if self.kind == "proven":
            return f"{self.target} holds no copy of any record of {self.source}"
        return f"recovery point unknown: {self.error}"

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at": _iso(self.at_ms),
            "age_seconds": self.age_seconds,
            "statement": self.statement(),
            "copied_until": _iso(self.copied_until_ms) if self.copied_until_ms else None,
            "newest_heartbeat": (
                _iso(self.newest_heartbeat_ms) if self.newest_heartbeat_ms else None
            ),
            "newest_heartbeat_age_seconds": (
                _age(self.at_ms, self.newest_heartbeat_ms) if self.newest_heartbeat_ms else None
            ),
            "topics": [
                {
                    "topic": t.topic,
                    "age_seconds": t.age_seconds,
                    "offsets_behind": t.offsets_behind,
                    "copied_until": _iso(t.copied_until_ms) if t.copied_until_ms else None,
                    "partitions_without_copies": t.uncopied,
                }
                for t in self.topics
            ],
            "error": self.error,
        }


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _age(now_ms: int, then_ms: int) -> float:
    return round(max(0, now_ms - then_ms) / 1000, 3)


def measured(
    config: FerryConfig,
    flow: FlowConfig,
    *,
    control: FlowControl | None = None,
    timeout: float = 10.0,
) -> RecoveryPoint:
    """Read on the source, at the flow's position on the target (the source answers), by the
    rule `ferry status` and `ferry monitor` use (`ferry.flows.rpo`)."""
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy, control)
    now = time.time()
    partitions = _partitions(source, selector, policy, timeout)
    ends = last_stable_offsets(source, partitions, timeout=timeout)
    positions = _positions(target, flow, policy, ends, timeout)
    rpos = read_rpos(source, positions, ends, timeout=timeout, clock=lambda: now)
    topics = []
    for topic in sorted({t for t, _p in partitions}):
        parts = [tp for tp in partitions if tp[0] == topic]
        age = flow_rpo(rpos.get(tp) for tp in parts)
        behind = sum(max(0, ends.get(tp, 0) - positions.get(tp, 0)) for tp in parts)
        topics.append(TopicPoint(topic, age, offsets_behind=behind))
    return RecoveryPoint("measured", flow.source, flow.target, int(now * 1000), topics)


def proven(config: FerryConfig, flow: FlowConfig, *, timeout: float = 10.0) -> RecoveryPoint:
    """What the target proves of the source (the source does not answer)."""
    target = config.clusters[flow.target]
    policy = flow.replication_policy
    now = int(time.time() * 1000)
    progress = GroupAdmin(target, timeout=timeout).committed(flow.progress_group)
    last: dict[TP, int | None] = {}
    by_topic: dict[str, list[int]] = {}
    for remote_topic, partition in sorted(progress):
        if not policy.is_heartbeats_topic(remote_topic):
            by_topic.setdefault(remote_topic, []).append(partition)
    settings = quiet(target.consumer_config())
    consumer = reader(settings)
    try:
        deadline = Deadline(timeout * 3, f"cluster {flow.target}: read the last copies")
        copied = [(t, p) for t, partitions in by_topic.items() for p in partitions]
        # Every partition's bounds in a few batched requests (one per partition made 10,000
        # partitions outlast the deadline), as the reader's isolation level sees its end.
        committed_only = settings.get("isolation.level", "read_committed") == "read_committed"
        bounds = _bounds(target, copied, committed_only, deadline)
        starts, ends = {}, {}
        for tp in copied:
            low, high = bounds[tp]
            starts[tp], ends[tp] = max(low, high - TAIL), high
            last[tp] = None
        # Every partition in one read: a read waits up to its poll timeout (0.5 s) for a
        # batch, and one per partition made 50 partitions take 25 s.
        records = read_partitions(consumer, starts, ends, deadline)
        with closing(_generator(records)) as reading:
            for msg in reading:  # in offset order per partition: the last copy wins
                stamp = _copy_timestamp(msg, flow.source)
                if stamp is not None:
                    last[(str(msg.topic()), int(msg.partition() or 0))] = stamp
    finally:
        consumer.close()
    topics = []
    for remote_topic in sorted({t for t, _p in last}):
        stamps = [s for (t, _p), s in last.items() if t == remote_topic]
        known = [s for s in stamps if s is not None]
        until = min(known) if known else None
        age = _age(now, until) if until is not None else None
        original = policy.upstream_topic(remote_topic) or remote_topic
        topics.append(
            TopicPoint(original, age, copied_until_ms=until, uncopied=len(stamps) - len(known))
        )
    untils = [t.copied_until_ms for t in topics if t.copied_until_ms is not None]
    beat = _newest_heartbeat(target, policy, flow.source, timeout)
    until_all = min(untils) if untils else None
    return RecoveryPoint("proven", flow.source, flow.target, now, topics, until_all, beat)


def _bounds(
    target: ClusterConfig, partitions: list[TP], committed_only: bool, deadline: Deadline
) -> dict[TP, tuple[int, int]]:
    """(first retained offset, end) of each partition, read through the admin API in
    batches, asked again while the cluster does not answer, until `deadline`."""
    if not partitions:
        return {}
    admin = clients.admin_client(quiet(target.admin_config()))

    def read(left: float) -> dict[TP, tuple[int, int]]:
        low = read_offsets(admin, partitions, "earliest", timeout=left)
        high = read_offsets(
            admin, partitions, "latest", timeout=left, committed_only=committed_only
        )
        return {tp: (low[tp], high[tp]) for tp in partitions}

    return deadline.retry(read)


def _generator(records: Iterable[Any]) -> Generator[Any, None, None]:
    """`read_records` is a generator: closed at once, it leaves the consumer unassigned
    before the next partition is read (not whenever it is collected)."""
    return cast(Generator[Any, None, None], records)


def _copy_timestamp(msg: Any, source_alias: str) -> int | None:
    """The record's timestamp if it is a copy from `source_alias` (its origin header names
    it; a record with no origin header counts: under the prefix policy a remote topic holds
    copies only), else None."""
    raw = dict(msg.headers() or ()).get(ORIGIN_HEADER)
    if raw is not None:
        try:
            if Origin.from_bytes(raw).alias != source_alias:
                return None
        except ValueError:
            pass
    return int(msg.timestamp()[1])


def _newest_heartbeat(
    target: ClusterConfig, policy: ReplicationPolicy, source_alias: str, timeout: float
) -> int | None:
    tail = TopicTail(
        target, policy.remote_topic(source_alias, policy.heartbeats_topic()), timeout=timeout
    )
    try:
        records = tail.read_last(TAIL)
    finally:
        tail.close()
    newest = None
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


def _partitions(
    cluster: ClusterConfig, selector: TopicSelector, policy: ReplicationPolicy, timeout: float
) -> list[TP]:
    """Every partition the flow selects on the source, heartbeats aside."""
    admin = clients.admin_client(cluster.admin_config())
    with kafka_errors(cluster, "list topics"):
        topics = admin.list_topics(timeout=timeout).topics
    return sorted(
        (name, p)
        for name, md in topics.items()
        if md.error is None and selector.accepts(name) and not policy.is_heartbeats_topic(name)
        for p in md.partitions
    )


def _positions(
    target: ClusterConfig,
    flow: FlowConfig,
    policy: ReplicationPolicy,
    partitions: Iterable[TP],
    timeout: float,
) -> dict[TP, int]:
    """The flow's position of each source partition: its progress group on the target, else
    the end of its offset runs; absent: nothing copied."""
    progress = GroupAdmin(target, timeout=timeout).committed(flow.progress_group)
    positions: dict[TP, int] = {}
    missing = []
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
