"""At-least-once commits on the target: the exact offset runs, then the flow's position.

Both run after the target acknowledged the copies they describe, runs first: a position is
never committed for copies whose runs are not there (failover translates through the runs).
A position carries the source topic's id as its commit's metadata (`progress_offset`), so a
topic deleted and created again is never taken for the one the position is in
(engine/plan/topic_ids.py).
`write_runs` and `commit_positions` wait for the target (the driver's commit of a bounded
micro-batch); `LeaseCommitter` does not, so a lease never stops copying to wait for a round
trip, which matters most where the target is a datacenter away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from ferry.config.model import ClusterConfig
from ferry.engine.copy.ack_wait import GaveUp, flush_until_acknowledged
from ferry.engine.copy.errors import unacknowledged_text
from ferry.engine.copy.types import PartitionResult
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.errors import kafka_errors
from ferry.kafka.offset_runs import OffsetSyncRecord

__all__ = ["LeaseCommitter", "commit_positions", "progress_offset", "topic_id_of", "write_runs"]

_TOPIC_ID = "topic-id="  # a position's commit metadata: the source topic's id


def progress_offset(remote_topic: str, partition: int, offset: int, topic_id: str) -> Any:
    """A position as committed: the remote partition's offset in the flow's progress group,
    with the source topic's id (`topic_id`; "" not known) as the commit's metadata."""
    if not topic_id:
        return TopicPartition(remote_topic, partition, offset)
    return TopicPartition(remote_topic, partition, offset, metadata=f"{_TOPIC_ID}{topic_id}")


def topic_id_of(metadata: str | None) -> str:
    """The source topic id a committed position names; "" when it names none."""
    if metadata and metadata.startswith(_TOPIC_ID):
        return metadata[len(_TOPIC_ID) :]
    return ""


def write_runs(
    producer: Any,
    runs_topic: str,
    source_alias: str,
    target: ClusterConfig,
    results: Sequence[PartitionResult],
    stopping: Callable[[], bool] | None = None,
) -> None:
    """Write the results' offset runs to `runs_topic` and wait for the target's ack (given
    up as engine/copy/ack_wait.py says, sooner once `stopping`)."""
    records = [
        OffsetSyncRecord(source_alias, r.topic, r.partition, run) for r in results for run in r.runs
    ]
    if not records:
        return
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(f"{err.name()}: {err.str()}")

    for record in records:
        producer.produce(
            runs_topic, record.value_bytes(), record.key_bytes(), on_delivery=on_delivery
        )
    gave_up = flush_until_acknowledged(producer, stopping)
    if gave_up is not None:
        raise runs_unacknowledged(target, gave_up)
    if failures:
        raise ReplicationError(
            f"could not write {len(failures)} offset run(s): {failures[0]}.",
            cluster=target.alias,
            topic=runs_topic,
            partition=0,
            fix="check that ferry may write to this topic; rerun to retry the batch",
        )


def commit_positions(
    consumer: Any,
    target: ClusterConfig,
    positions: dict[tuple[str, int], int],
    ids: Mapping[tuple[str, int], str] | None = None,
) -> None:
    """Commit `{(remote topic, partition): next source offset}` in the consumer's group (the
    flow's progress group) on the target, each with its source topic's id from `ids`;
    positions below 0 (nothing seen yet) are left out."""
    ids = ids or {}
    offsets = [
        progress_offset(t, p, o, ids.get((t, p), ""))
        for (t, p), o in sorted(positions.items())
        if o >= 0
    ]
    if not offsets:
        return
    with kafka_errors(target, "commit ferry's progress"):
        consumer.commit(offsets=offsets, asynchronous=False)


@dataclass
class _Pending:
    """One slice's commit: its runs on their way to the target, then its positions."""

    positions: dict[tuple[str, int], int]
    unacked: int = 0
    failures: list[str] = field(default_factory=list)

    def on_delivery(self, err: Any, _msg: Any) -> None:
        self.unacked -= 1
        if err is not None:
            self.failures.append(f"{err.name()}: {err.str()}")


def runs_unacknowledged(target: ClusterConfig, gave_up: GaveUp) -> KafkaUnavailableError:
    """Offset runs (or copies) the target did not acknowledge (engine/copy/ack_wait.py)."""
    return KafkaUnavailableError(
        target.alias,
        target.bootstrap_servers,
        unacknowledged_text(gave_up, "the positions they carry are not committed"),
        what="did not acknowledge copies",
    )


class LeaseCommitter:
    """A lease's commits after each slice, without waiting: the slice's runs are produced
    now, and its positions committed (asynchronously) at a later slice, once the target
    acknowledged those runs. `finish` waits for everything and commits the last positions
    synchronously, so when a lease ends its position is on the target."""

    def __init__(
        self,
        producer: Any,
        progress: Any,
        runs_topic: str,
        source_alias: str,
        target: ClusterConfig,
        ids: Mapping[tuple[str, int], str] | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        """`ids`: the source topic's id of each (remote topic, partition), committed beside
        its position. `stopping`: `finish` may give up waiting for the runs' acknowledgement
        (engine/copy/ack_wait.py)."""
        self._ids = dict(ids or {})
        self._stopping = stopping
        self._producer = producer
        self._progress = progress
        self._runs_topic = runs_topic
        self._source_alias = source_alias
        self._target = target
        self._pending: list[_Pending] = []
        self._ready: dict[tuple[str, int], int] = {}  # positions whose runs were acknowledged

    def commit(
        self, results: Sequence[PartitionResult], positions: dict[tuple[str, int], int]
    ) -> None:
        """`results`' runs (of acknowledged copies) and the `positions` they bring the flow to,
        by remote topic and partition."""
        pending = _Pending(dict(positions))
        for r in results:
            for run in r.runs:
                record = OffsetSyncRecord(self._source_alias, r.topic, r.partition, run)
                pending.unacked += 1
                self._producer.produce(
                    self._runs_topic,
                    record.value_bytes(),
                    record.key_bytes(),
                    on_delivery=pending.on_delivery,
                )
        self._pending.append(pending)
        self._producer.poll(0)
        self._advance()

    def finish(self) -> None:
        gave_up = flush_until_acknowledged(self._producer, self._stopping)
        if gave_up is not None:
            raise runs_unacknowledged(self._target, gave_up)
        self._advance()
        # Every position again, synchronously: an asynchronous commit may have failed unseen.
        commit_positions(self._progress, self._target, self._ready, self._ids)

    def _advance(self) -> None:
        ready = False
        while self._pending and self._pending[0].unacked <= 0:
            done = self._pending.pop(0)
            if done.failures:
                raise ReplicationError(
                    f"could not write {len(done.failures)} offset run(s): {done.failures[0]}.",
                    cluster=self._target.alias,
                    topic=self._runs_topic,
                    partition=0,
                    fix="check that ferry may write to this topic; the lease is retried",
                )
            self._ready.update({tp: o for tp, o in done.positions.items() if o >= 0})
            ready = True
        if not ready or not self._ready:
            return
        # Every position each time, moved or not: an asynchronous commit that failed (say,
        # the group's coordinator moved) is not reported, and the next one repairs it.
        offsets = [
            progress_offset(t, p, o, self._ids.get((t, p), ""))
            for (t, p), o in sorted(self._ready.items())
        ]
        with kafka_errors(self._target, "commit ferry's progress"):
            self._progress.commit(offsets=offsets, asynchronous=True)
