"""`ferry reconcile --replay` and `--divert`: the stranded tail (`ferry.ops.reconcile`) written
to B.

- `replay`: each stranded record copied to the remote topic on B (same partition, key, value,
  headers, timestamp; `ferry.origin` added unless present, plus `ferry.late` and
  `ferry.stranded`), in transactions that also hold the copies' offset runs; then the flow's
  progress on B moved to A's end. A second replay finds nothing stranded: the position says
  so, and where a crash lost the position commit, the runs do. An aborted transaction's copies
  are invisible to read_committed consumers.
- `divert`: the same copies into a quarantine topic on B (created if missing); records whose
  `ferry.stranded` header the topic already holds are not written again; then the position is
  moved as for a replay, so a restarted flow A->B does not copy them into the remote topic.

Run them with the flow A->B stopped: both write the flow's position on B.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig
from ferry.engine.copy.client_settings import producer_settings, transactional_settings
from ferry.errors import ReplicationError
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.offset_runs import OffsetSyncRecord, RunBuilder
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.offsets.groups import GroupAdmin
from ferry.ops.reconcile import ReconcilePlan, log_bounds, read_ranges, stranded_records

if TYPE_CHECKING:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

__all__ = ["LATE_HEADER", "STRANDED_HEADER", "Applied", "divert", "replay"]

TP = tuple[str, int]
LATE_HEADER = "ferry.late"  # b"1": copied after the failover, not in order with its neighbours
STRANDED_HEADER = "ferry.stranded"  # where on A it was stranded, in ferry.origin's format
TRANSACTION_RECORDS = 5000  # copies per replay transaction (well inside its timeout)
TRANSACTION_TIMEOUT_MS = 120_000


@dataclass
class Applied:
    """What a policy wrote: records written, records found already there, where."""

    action: str
    written: int = 0
    already: int = 0
    topics: list[str] = field(default_factory=list)
    positions_moved: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "written": self.written,
            "already_there": self.already,
            "topics": self.topics,
            "positions_moved": self.positions_moved,
        }


def replay(plan: ReconcilePlan, *, timeout: float = 10.0) -> Applied:
    """Copy the stranded records into their remote topics on B, exactly once (module doc)."""
    applied = Applied("replay", topics=sorted({plan.remote[p.topic] for p in plan.with_stranded()}))
    target, flow = plan.target, plan.flow
    runs_topic = flow.replication_policy.offset_runs_topic(flow.source)
    if plan.stranded:
        _ensure_topics(
            plan,
            {plan.remote[p.topic]: _partitions_needed(plan, p.topic) for p in plan.with_stranded()},
            timeout,
        )
        settings = transactional_settings(
            producer_settings(target, transactional=True),
            f"ferry-reconcile-{flow.source}-to-{flow.target}",
            TRANSACTION_TIMEOUT_MS,
        )
        producer = clients.producer(settings)
        with kafka_errors(target, "start the replay's transactions"):
            producer.init_transactions(timeout)
        batch: list[Any] = []
        for message in stranded_records(plan, timeout):
            batch.append(message)
            if len(batch) >= TRANSACTION_RECORDS:
                applied.written += _replay_batch(plan, producer, runs_topic, batch, timeout)
                batch = []
        if batch:
            applied.written += _replay_batch(plan, producer, runs_topic, batch, timeout)
    applied.positions_moved = _move_positions(plan, timeout)
    return applied


def divert(plan: ReconcilePlan, topic: str, *, timeout: float = 10.0) -> Applied:
    """Copy the stranded records into `topic` on B (created if missing), each once."""
    applied = Applied("divert", topics=[topic])
    target = plan.target
    if plan.stranded:
        needed = max(_partitions_needed(plan, p.topic) for p in plan.with_stranded())
        count = _ensure_topics(plan, {topic: needed}, timeout, grow=False)[topic]
        there = _stranded_marks(target, topic, count, timeout)
        producer = clients.producer(producer_settings(target))
        failures: list[tuple[Any, str]] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                failures.append((msg, f"{err.name()}: {err.str()}"))

        for message in stranded_records(plan, timeout):
            headers = _copy_headers(plan, message)
            if dict(headers)[STRANDED_HEADER] in there:
                applied.already += 1
                continue
            with kafka_errors(target, f"write to {topic}", topic=topic, fix=_WRITE_FIX):
                producer.produce(
                    topic,
                    value=message.value(),
                    key=message.key(),
                    partition=message.partition() % count,
                    timestamp=max(0, message.timestamp()[1]),
                    headers=headers,
                    on_delivery=on_delivery,
                )
            producer.poll(0)
            applied.written += 1
        _flush(producer, target, timeout)
        if failures:
            msg, text = failures[0]
            raise _write_failed(plan, topic, msg, text, len(failures))
    applied.positions_moved = _move_positions(plan, timeout)
    return applied


_WRITE_FIX = "check that ferry may write to the topic on the target; rerun: nothing is copied twice"


def _copy_headers(plan: ReconcilePlan, message: Any) -> list[tuple[str, str | bytes | None]]:
    here = Origin(
        plan.source_cluster_id,
        plan.flow.source,
        message.topic(),
        message.partition(),
        message.offset(),
    ).to_bytes()
    headers: list[tuple[str, str | bytes | None]] = list(message.headers() or ())
    if not any(name == ORIGIN_HEADER for name, _ in headers):
        headers.append((ORIGIN_HEADER, here))
    headers.append((LATE_HEADER, b"1"))
    headers.append((STRANDED_HEADER, here))
    return headers


def _replay_batch(
    plan: ReconcilePlan, producer: Producer, runs_topic: str, batch: list[Any], timeout: float
) -> int:
    """One transaction: the copies, then their offset runs (from the delivery reports)."""
    target = plan.target
    delivered: dict[tuple[TP, int], int] = {}
    failures: list[tuple[Any, str]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append((msg, f"{err.name()}: {err.str()}"))

    with kafka_errors(target, "begin a replay transaction"):
        producer.begin_transaction()
    for message in batch:
        remote = plan.remote[message.topic()]
        key = ((message.topic(), message.partition()), message.offset())

        def record(err: Any, msg: Any, key: tuple[TP, int] = key) -> None:
            on_delivery(err, msg)
            if err is None:
                delivered[key] = msg.offset()

        with kafka_errors(target, f"write to {remote}", topic=remote, fix=_WRITE_FIX):
            producer.produce(
                remote,
                value=message.value(),
                key=message.key(),
                partition=message.partition(),
                timestamp=max(0, message.timestamp()[1]),
                headers=_copy_headers(plan, message),
                on_delivery=record,
            )
        producer.poll(0)
    _flush(producer, target, timeout)
    if failures:
        _abort(producer)
        msg, text = failures[0]
        raise _write_failed(plan, msg.topic(), msg, text, len(failures))
    builders: dict[TP, RunBuilder] = {}
    for (tp, upstream), downstream in sorted(delivered.items()):
        builders.setdefault(tp, RunBuilder()).add(upstream, downstream)
    for (topic, partition), builder in sorted(builders.items()):
        for run in builder.runs():
            sync = OffsetSyncRecord(plan.flow.source, topic, partition, run)
            with kafka_errors(target, f"write to {runs_topic}", topic=runs_topic, fix=_WRITE_FIX):
                producer.produce(runs_topic, sync.value_bytes(), sync.key_bytes())
    _flush(producer, target, timeout)
    with kafka_errors(target, "commit a replay transaction"):
        producer.commit_transaction(timeout * 6)
    return len(delivered)


def _abort(producer: Producer) -> None:
    with contextlib.suppress(Exception):  # the transaction times out on the broker anyway
        producer.abort_transaction(10)


def _flush(producer: Producer, target: ClusterConfig, timeout: float) -> None:
    deadline = time.monotonic() + max(timeout, 120.0)
    while producer.flush(1.0) > 0:
        if time.monotonic() > deadline:
            raise ReplicationError(
                "the target did not acknowledge the copies in time.",
                cluster=target.alias,
                topic="(several)",
                fix="check that the cluster answers; rerun: nothing is copied twice",
            )


def _write_failed(
    plan: ReconcilePlan, topic: str, msg: Any, text: str, count: int
) -> ReplicationError:
    return ReplicationError(
        f"{count} cop(ies) were refused: {text} (the first is of offset "
        f"{_stranded_offset(msg)} on {plan.flow.source}).",
        cluster=plan.target.alias,
        topic=topic,
        partition=msg.partition(),
        fix=_WRITE_FIX,
    )


def _stranded_offset(msg: Any) -> str:
    for name, value in msg.headers() or ():
        if name == STRANDED_HEADER and value is not None:
            origin = Origin.from_bytes(value)
            return f"{origin.offset} of {origin.topic} partition {origin.partition}"
    return "?"


def _partitions_needed(plan: ReconcilePlan, topic: str) -> int:
    return max(p.partition for p in plan.partitions if p.topic == topic) + 1


def _ensure_topics(
    plan: ReconcilePlan, needed: dict[str, int], timeout: float, *, grow: bool = True
) -> dict[str, int]:
    """Each topic on B with at least the partitions needed (created if missing); returns
    the partition counts. A remote topic with too few partitions is refused: a copy keeps
    its partition number."""
    target = plan.target
    admin = clients.admin_client(target.admin_config())
    with kafka_errors(target, "list topics"):
        existing = admin.list_topics(timeout=timeout).topics
    counts: dict[str, int] = {}
    missing = []
    for topic, partitions in sorted(needed.items()):
        md = existing.get(topic)
        if md is None or md.error is not None:
            missing.append(NewTopic(topic, partitions, plan.flow.replication_factor))
            counts[topic] = partitions
            continue
        counts[topic] = len(md.partitions)
        if grow and len(md.partitions) < partitions:
            raise ReplicationError(
                f"it has {len(md.partitions)} partition(s); the copy of partition "
                f"{partitions - 1} needs {partitions}.",
                cluster=target.alias,
                topic=topic,
                partition=partitions - 1,
                fix=f"add partitions to {topic} on {target.alias} and rerun",
            )
    if missing:
        futures = admin.create_topics(missing, request_timeout=timeout)
        for topic, future in futures.items():
            with kafka_errors(
                target,
                f"create topic {topic}",
                topic=topic,
                fix="create it by hand, or let ferry's principal create topics",
                done=(KafkaError.TOPIC_ALREADY_EXISTS,),
            ):
                future.result()
        _wait_for_topics(target, admin, counts, timeout)
    return counts


def _wait_for_topics(
    cluster: ClusterConfig, admin: AdminClient, counts: dict[str, int], timeout: float
) -> None:
    deadline = time.monotonic() + max(timeout, 30.0)
    while time.monotonic() < deadline:
        with kafka_errors(cluster, "list topics"):
            topics = admin.list_topics(timeout=timeout).topics
        if all(
            t in topics and topics[t].error is None and len(topics[t].partitions) >= n
            for t, n in counts.items()
        ):
            return
        time.sleep(0.2)
    raise ReplicationError(
        "created, but its partitions have no leader yet.",
        cluster=cluster.alias,
        topic=", ".join(sorted(counts)),
        fix="rerun in a moment",
    )


def _stranded_marks(
    cluster: ClusterConfig, topic: str, partitions: int, timeout: float
) -> set[bytes]:
    """The `ferry.stranded` values `topic` already holds: what an earlier divert wrote."""
    admin = clients.admin_client(cluster.admin_config())
    bounds = log_bounds(cluster, admin, [(topic, p) for p in range(partitions)], timeout)
    marks: set[bytes] = set()
    for message in read_ranges(cluster, bounds, timeout):
        for name, value in message.headers() or ():
            if name == STRANDED_HEADER and value is not None:
                marks.add(value)
    return marks


def _move_positions(plan: ReconcilePlan, timeout: float) -> int:
    """The flow's progress on B moved to A's end wherever it was behind it: every record
    before that end is now on B or came from B."""
    moves = {
        (plan.remote[p.topic], p.partition): p.log_end
        for p in plan.partitions
        if p.start < p.log_end
    }
    GroupAdmin(plan.target, timeout=timeout).commit(plan.flow.progress_group, moves)
    return len(moves)
