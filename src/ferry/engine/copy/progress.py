"""At-least-once commits on the target: the exact offset runs, then the flow's position.

Both run after the target acknowledged the copies they describe, runs first: a position is
never committed for copies whose runs are not there (failover translates through the runs).
Used by a leased task after every slice and, in micro-batch mode, by the driver's commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ferry.config.model import ClusterConfig
from ferry.engine.copy.types import PartitionResult
from ferry.errors import ReplicationError
from ferry.kafka.errors import unavailable
from ferry.kafka.offset_runs import OffsetSyncRecord

__all__ = ["commit_positions", "write_runs"]


def write_runs(
    producer: Any,
    runs_topic: str,
    source_alias: str,
    target: ClusterConfig,
    results: Sequence[PartitionResult],
) -> None:
    """Write the results' offset runs to `runs_topic` and wait for the target's ack."""
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
    while producer.flush(1.0) > 0:
        pass
    if failures:
        raise ReplicationError(
            f"could not write {len(failures)} offset run(s): {failures[0]}.",
            cluster=target.alias,
            topic=runs_topic,
            partition=0,
            fix="check that ferry may write to this topic; rerun to retry the batch",
        )


def commit_positions(
    consumer: Any, target: ClusterConfig, positions: dict[tuple[str, int], int]
) -> None:
    """Commit `{(remote topic, partition): next source offset}` in the consumer's group (the
    flow's progress group) on the target; positions below 0 (nothing seen yet) are left out."""
    offsets = [TopicPartition(t, p, o) for (t, p), o in sorted(positions.items()) if o >= 0]
    if not offsets:
        return
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        raise unavailable(target, exc) from None
