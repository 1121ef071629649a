"""Admin requests split into batches the brokers accept.

A KRaft controller refuses a CreateTopics request that creates more than 10,000 partitions in
all (`POLICY_VIOLATION: Excessively large number of partitions per request.`), and writes at
most 10,000 metadata records for one user operation; a request about a thousand topics of ten
partitions each is over both. Every admin request ferry sends about many topics, partitions,
configs or ACLs goes through `batches` (pure) or `submit` (sends each batch, waits for none).

`batches` keeps the items' order; a batch's weight (the sum of its items' weights) is at most
the limit, except an item heavier than the limit alone, which goes in a batch of its own: the
brokers' refusal then names that one item, not every item of a request.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TypeVar

__all__ = [
    "MAX_ACLS_PER_REQUEST",
    "MAX_CONFIG_RESOURCES_PER_REQUEST",
    "MAX_OFFSETS_PARTITIONS_PER_REQUEST",
    "MAX_PARTITIONS_PER_COMMITTED_READ",
    "MAX_PARTITIONS_PER_CREATE",
    "MAX_RECORDS_PER_CONTROLLER_REQUEST",
    "MAX_TOPICS_PER_METADATA_REQUEST",
    "batches",
    "create_weight",
    "submit",
]

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

# Kafka's KRaft controller: ReplicationControlManager.MAX_PARTITIONS_PER_BATCH = 10_000
# (metadata/src/main/java/org/apache/kafka/controller/ReplicationControlManager.java); a
# CreateTopics request whose partitions add up to more is refused whole with POLICY_VIOLATION.
MAX_PARTITIONS_PER_CREATE = 10_000

# Kafka's KRaft controller: QuorumController.MAX_RECORDS_PER_USER_OP = 10000, the metadata
# records one admin request may write (a topic: one TopicRecord, one PartitionRecord per
# partition, one ConfigRecord per setting; an ACL: one AccessControlEntryRecord; a changed
# topic setting: one ConfigRecord).
MAX_RECORDS_PER_CONTROLLER_REQUEST = 10_000

# The limits below are ferry's, not the brokers' (which set none but the request's size,
# socket.request.max.bytes, 100 MiB by default): they keep each request and its answer small
# enough to be answered well inside the request timeout on a loaded broker.
MAX_CONFIG_RESOURCES_PER_REQUEST = 1_000  # DescribeConfigs, IncrementalAlterConfigs
MAX_ACLS_PER_REQUEST = 1_000  # CreateAcls (also under the controller's record limit)
MAX_OFFSETS_PARTITIONS_PER_REQUEST = 5_000  # ListOffsets, OffsetFetch, offsets_for_times
MAX_TOPICS_PER_METADATA_REQUEST = 1_000  # DescribeTopics
# A consumer's committed offsets (OffsetFetch through `Consumer.committed`): the client's CPU
# grows with the square of the partitions asked in one call. Measured here, a group's offsets
# over 10,000 partitions: 422 ms of CPU asked at once, 34 ms in calls of 500, 25 ms of 250,
# 27 ms of 100 (fewer partitions a call: more round trips for no less CPU).
MAX_PARTITIONS_PER_COMMITTED_READ = 250


def batches(
    items: Iterable[T], limit: int, weight: Callable[[T], int] = lambda _item: 1
) -> Iterator[list[T]]:
    """`items` in order, in consecutive batches of total weight at most `limit` (an item
    heavier than `limit` alone in its batch). An empty input gives no batch."""
    if limit < 1:
        raise ValueError(f"batches: limit must be at least 1, not {limit}")
    batch: list[T] = []
    total = 0
    for item in items:
        w = max(0, weight(item))
        if batch and total + w > limit:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += w
    if batch:
        yield batch


# Settings whose ConfigRecord brings one more controller record with it. Kafka 4's controller
# (eligible leader replicas, KIP-966) follows a topic's `min.insync.replicas` with a record of
# its own: 666 topics of 10 partitions with 3 settings, this one among them, were accepted in
# one request and 714 refused with POLICY_VIOLATION, where 714 without it were accepted.
TWO_RECORD_SETTINGS = frozenset({"min.insync.replicas"})


def create_weight(partitions: int, settings: Collection[str]) -> int:
    """The controller records creating one topic writes: the topic, each partition, each
    setting (two for `TWO_RECORD_SETTINGS`). At most `MAX_RECORDS_PER_CONTROLLER_REQUEST` in a
    batch keeps it under both the record and the partition limit (the partitions alone are
    fewer)."""
    extra = sum(1 for name in settings if name in TWO_RECORD_SETTINGS)
    return 1 + max(partitions, 0) + len(settings) + extra


def submit(
    send: Callable[[list[T]], Mapping[K, V]],
    items: Iterable[T],
    limit: int,
    weight: Callable[[T], int] = lambda _item: 1,
) -> dict[K, V]:
    """Every batch of `items` sent with `send` (an admin call returning futures by key), all
    before any is waited for: the futures of every batch, merged."""
    futures: dict[K, V] = {}
    for batch in batches(items, limit, weight):
        futures.update(send(batch))
    return futures
