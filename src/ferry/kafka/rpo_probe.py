"""The reads behind the recovery point objective: per lagging source partition, the first real
record at or after the flow's position (`ferry.flows.rpo` holds the rule; this is its I/O).

Bounded, so that thousands of lagging partitions stay cheap: one consumer per call (a call per
source cluster), every partition assigned at once at its position, at most one record taken
per partition (the partition is paused once it answered, and the client prefetches one
message per partition at most), small fetches, one deadline for them all. A partition that did
not answer by then is left out, which the rule reads as unknown, never as 0.

read_committed: the client skips aborted records and transaction markers, and a compaction
gap holds no record, so the first record it returns is the first real one. A partition that
holds none before its end gives the end-of-partition event instead (`NoRecordBefore`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig
from ferry.flows.rpo import FirstRecord, NoRecordBefore, Probe, lagging, partition_rpos
from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, submit
from ferry.kafka.errors import kafka_errors

__all__ = ["DEFAULT_TIMEOUT", "first_records", "last_stable_offsets", "read_rpos"]

TP = tuple[str, int]
DEFAULT_TIMEOUT = 5.0  # seconds for every partition of one call together
POLL_SECONDS = 0.2

# One record per partition is all a probe keeps: fetch little, prefetch nothing more.
_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",  # a position below the log start: its first record
    "isolation.level": "read_committed",
    "allow.auto.create.topics": False,
    "fetch.wait.max.ms": 100,
    "max.partition.fetch.bytes": 16384,
    "queued.min.messages": 1,
    "queued.max.messages.kbytes": 1024,
}


def first_records(
    cluster: ClusterConfig, starts: Mapping[TP, int], *, timeout: float = DEFAULT_TIMEOUT
) -> dict[TP, Probe]:
    """What reading each partition of `starts` from its offset found, for the partitions that
    answered within `timeout` seconds (one consumer, one deadline for all)."""
    if not starts:
        return {}
    settings = {**cluster.consumer_config(), **_SETTINGS}
    settings["group.id"] = f"ferry-rpo-{uuid.uuid4().hex[:12]}"  # assigned, never joined
    with kafka_errors(cluster, "read the first records not copied"):
        consumer = clients.consumer(settings)
    found: dict[TP, Probe] = {}
    try:
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in starts.items()])
        deadline = time.monotonic() + timeout
        while len(found) < len(starts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            answered = [
                tp
                for msg in consumer.consume(1000, min(left, POLL_SECONDS))
                if (tp := _answer(msg, starts, found)) is not None
            ]
            if answered:
                consumer.pause([TopicPartition(t, p) for t, p in answered])
    finally:
        consumer.close()
    return found


def _answer(msg: Any, starts: Mapping[TP, int], found: dict[TP, Probe]) -> TP | None:
    """Record what `msg` says of its partition, if it is the partition's first answer."""
    tp = (msg.topic(), msg.partition())
    if tp not in starts or tp in found:
        return None
    error = msg.error()
    if error is not None:
        if error.code() != KafkaError._PARTITION_EOF:
            return None  # the client retries; what stays unanswered is unknown
        found[tp] = NoRecordBefore(int(msg.offset()))
        return tp
    kind, stamp = msg.timestamp()
    found[tp] = FirstRecord(int(msg.offset()), None if kind == TIMESTAMP_NOT_AVAILABLE else stamp)
    return tp


def last_stable_offsets(
    cluster: ClusterConfig, partitions: Iterable[TP], *, timeout: float = DEFAULT_TIMEOUT
) -> dict[TP, int]:
    """Each partition's end as read_committed consumers see it; partitions that did not
    answer within `timeout` are left out."""
    # ignore: OffsetSpec.latest/earliest are unannotated in confluent-kafka 2.16.
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = [TopicPartition(t, p) for t, p in partitions]
    if not request:
        return {}
    with kafka_errors(cluster, "read the source's ends"):
        admin = clients.admin_client(cluster.admin_config())
        futures = submit(
            lambda batch: admin.list_offsets(
                dict.fromkeys(batch, latest),
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=timeout,
            ),
            request,
            MAX_OFFSETS_PARTITIONS_PER_REQUEST,
        )
    ends: dict[TP, int] = {}
    for tp, future in futures.items():
        try:
            ends[(tp.topic, tp.partition)] = int(future.result(timeout + 1).offset)
        except (KafkaException, TimeoutError):
            continue  # not answered: its RPO is unknown
    return ends


def read_rpos(
    cluster: ClusterConfig,
    positions: Mapping[TP, int],
    ends: Mapping[TP, int],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    clock: Callable[[], float] = time.time,
) -> dict[TP, float | None]:
    """The RPO in seconds of every partition of `ends` (source partitions on `cluster`), given
    the flow's positions: the lagging ones read, one record each, within `timeout`."""
    probes = first_records(cluster, lagging(positions, ends), timeout=timeout)
    return partition_rpos(positions, ends, probes, int(clock() * 1000))
