"""Partitions' log bounds through the admin API (ListOffsets), batched as every large admin
request is (`admin_batches`), and their answers read as offsets.

The ends are last stable offsets by default (read_committed: an open transaction's records
are not counted), which is what lag, a drain and a recovery point compare with positions that
only committed records reach.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, submit
from ferry.kafka.errors import kafka_errors

__all__ = ["log_bounds", "offset_futures", "read_ends", "read_offsets"]

TP = tuple[str, int]
Which = Literal["earliest", "latest"]


def offset_futures(
    admin: Any,
    partitions: Iterable[TP],
    which: Which = "latest",
    *,
    timeout: float,
    committed_only: bool = True,
) -> dict[TopicPartition, Any]:
    """ListOffsets of `partitions` (their first retained offset, or their end), sent in
    batches all at once: each partition's future, by TopicPartition."""
    # ignore: OffsetSpec.latest/earliest are unannotated in confluent-kafka 2.16.
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()  # type: ignore[no-untyped-call]
    isolation = IsolationLevel.READ_COMMITTED if committed_only else IsolationLevel.READ_UNCOMMITTED
    request = [TopicPartition(t, p) for t, p in partitions]
    return submit(
        lambda batch: admin.list_offsets(
            dict.fromkeys(batch, spec), isolation_level=isolation, request_timeout=timeout
        ),
        request,
        MAX_OFFSETS_PARTITIONS_PER_REQUEST,
    )


def read_offsets(
    admin: Any,
    partitions: Iterable[TP],
    which: Which = "latest",
    *,
    timeout: float,
    committed_only: bool = True,
    answer: Callable[[TopicPartition, Any], int | None] | None = None,
) -> dict[TP, int]:
    """The offsets `offset_futures` asks for, by (topic, partition). `answer(tp, future)`
    reads one (a caller's error handling around `future.result()`; None leaves the partition
    out); by default `future.result().offset`, whose KafkaException the caller maps."""
    futures = offset_futures(
        admin, partitions, which, timeout=timeout, committed_only=committed_only
    )
    found: dict[TP, int] = {}
    for tp, future in futures.items():
        offset = answer(tp, future) if answer else int(future.result().offset)
        if offset is not None:
            found[(tp.topic, tp.partition)] = int(offset)
    return found


def read_ends(
    cluster: ClusterConfig, admin: Any, partitions: Iterable[TP], *, timeout: float
) -> dict[TP, int]:
    """Each partition's last stable offset; a partition that cannot be read raises the error
    `kafka_errors` makes of it, naming the cluster, topic and partition."""

    def answer(tp: TopicPartition, future: Any) -> int:
        with kafka_errors(cluster, f"read the end of {tp.topic} partition {tp.partition}"):
            return int(future.result().offset)

    return read_offsets(admin, partitions, "latest", timeout=timeout, answer=answer)


def log_bounds(
    cluster: ClusterConfig, admin: Any, partitions: list[TP], *, timeout: float
) -> dict[TP, tuple[int, int]]:
    """(first retained offset, last stable offset) of each partition."""

    def answer(tp: TopicPartition, future: Any) -> int:
        with kafka_errors(cluster, f"read the offsets of {tp.topic} partition {tp.partition}"):
            return int(future.result().offset)

    low = read_offsets(admin, partitions, "earliest", timeout=timeout, answer=answer)
    high = read_offsets(admin, partitions, "latest", timeout=timeout, answer=answer)
    return {tp: (low[tp], high[tp]) for tp in partitions}
