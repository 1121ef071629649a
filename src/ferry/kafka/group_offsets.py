"""A consumer group's committed offsets, read and committed through a consumer of that group.

Not through the admin API: librdkafka (2.16) crashes the whole process (a NULL dereference in
its main thread) when an admin client's OffsetFetch answer says the group's coordinator is
not available or has moved, which is what a cluster answers while it creates
`__consumer_offsets` (its first group) or while a coordinator moves to another broker. And
every request an admin client sends to a group's coordinator (OffsetFetch, OffsetCommit,
DescribeGroups) aborts the process (`rd_kafka_enq_once_del_source_return: Assertion
'eonce->refcnt > 0' failed`, a use-after-free) when the request cannot be sent because the
coordinator's connection just dropped: a link between datacenters cut while ferry run syncs
groups. A consumer asks for its coordinator again on those answers, as it should, and waits
for one at most its `session.timeout.ms`. The consumer never subscribes, so it never joins
the group: the group's members see nothing of it, and a commit of its (generation -1, no
member id) is refused by the coordinator while the group has members.

It reads with `isolation.level = read_uncommitted`, as the admin API does: offsets a
transaction has not committed yet are not waited for (a replicator committing one every
slice would keep a stable read waiting); the last committed ones are returned.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from confluent_kafka import TopicPartition

from ferry.config.model import ClusterConfig
from ferry.kafka import clients
from ferry.kafka.admin_batches import (
    MAX_OFFSETS_PARTITIONS_PER_REQUEST,
    MAX_PARTITIONS_PER_COMMITTED_READ,
    batches,
)

__all__ = [
    "GroupOffsetError",
    "commit_group_offsets",
    "committed_in_batches",
    "read_group_offsets",
]

TP = tuple[str, int]


class GroupOffsetError(Exception):
    """A partition's offset the coordinator refused to give (`tp`, its KafkaError)."""

    def __init__(self, tp: TP, error: Any) -> None:
        super().__init__(f"{tp[0]} partition {tp[1]}: {error}")
        self.tp = tp
        self.error = error


def read_group_offsets(
    cluster: ClusterConfig,
    group: str,
    partitions: Collection[TP] | None = None,
    *,
    topics: Collection[str] | None = None,
    timeout: float = 10.0,
) -> dict[TP, int]:
    """`group`'s committed offsets (the next record to read) of `partitions`, or when None
    of every partition of `topics` (None: every topic of the cluster but its internal `__`
    ones); partitions without one are left out. Raises KafkaException when the cluster or
    the group's coordinator does not answer within `timeout`, GroupOffsetError for a
    partition refused."""
    if partitions is not None and not partitions:
        return {}
    consumer = clients.consumer(
        {
            **cluster.consumer_config(),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        if partitions is None:
            metadata = consumer.list_topics(timeout=timeout)
            partitions = [
                (name, p)
                for name, topic in sorted(metadata.topics.items())
                if topic.error is None
                and not name.startswith("__")
                and (topics is None or name in topics)
                for p in sorted(topic.partitions)
            ]
        if not partitions:
            return {}
        request = [TopicPartition(t, p) for t, p in partitions]
        answer = committed_in_batches(consumer, request, timeout)
    finally:
        consumer.close()
    offsets: dict[TP, int] = {}
    for tp in answer:
        if tp.error is not None:
            raise GroupOffsetError((tp.topic, tp.partition), tp.error)
        if tp.offset >= 0:
            offsets[(tp.topic, tp.partition)] = int(tp.offset)
    return offsets


def committed_in_batches(
    consumer: Any, request: Sequence[TopicPartition], timeout: float
) -> list[TopicPartition]:
    """`consumer.committed(request)`, asked MAX_PARTITIONS_PER_COMMITTED_READ partitions at a
    time (the client's cost of one call grows with the square of its partitions), all within
    `timeout`; the answers in the request's order. Raises what `committed` raises."""
    deadline = time.monotonic() + timeout
    answer: list[TopicPartition] = []
    for batch in batches(request, MAX_PARTITIONS_PER_COMMITTED_READ):
        answer += consumer.committed(batch, timeout=max(0.1, deadline - time.monotonic()))
    return answer


def commit_group_offsets(
    cluster: ClusterConfig, group: str, offsets: Mapping[TP, int], *, timeout: float = 10.0
) -> None:
    """Commit `group`'s `offsets` (the next record to read), MAX_OFFSETS_PARTITIONS_PER_REQUEST
    partitions a request. Raises KafkaException when the cluster or the group's coordinator
    does not answer within `timeout` (`_WAIT_COORD`) or refuses the whole request (e.g.
    UNKNOWN_MEMBER_ID: the group has members), GroupOffsetError for a partition refused."""
    if not offsets:
        return
    consumer = clients.consumer(
        {
            **cluster.consumer_config(),
            "group.id": group,
            "enable.auto.commit": False,
            # How long a commit waits for the group's coordinator (found, connected).
            "session.timeout.ms": max(1000, int(timeout * 1000)),
        }
    )
    try:
        request = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        for batch in batches(request, MAX_OFFSETS_PARTITIONS_PER_REQUEST):
            for tp in consumer.commit(offsets=batch, asynchronous=False) or ():
                if tp.error is not None:
                    raise GroupOffsetError((tp.topic, tp.partition), tp.error)
    finally:
        consumer.close()
