"""Consumer groups: list, read offsets (through a consumer of the group), check activity, commit
offsets (through the admin API)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.errors import FerryError
from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, batches
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable
from ferry.kafka.group_offsets import GroupOffsetError, read_group_offsets

__all__ = ["GroupAdmin", "GroupState", "group_filter"]

TopicPartitionKey = tuple[str, int]

# Answers that mean "ask again in a moment".
_RETRY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # Kafka's group state: EMPTY, STABLE, DEAD (no such group), ...
    members: tuple[str, ...]  # client ids of active members

    @property
    def active(self) -> bool:
        return bool(self.members)


def group_filter(flow: FlowConfig) -> Any:
    """MM2's group selection: `groups` minus `groups.exclude`, whole-name regexes."""
    include = [re.compile(p) for p in flow.groups]
    exclude = [re.compile(p) for p in flow.groups_exclude]

    def accepts(group: str) -> bool:
        return any(p.fullmatch(group) for p in include) and not any(
            p.fullmatch(group) for p in exclude
        )

    return accepts


class GroupAdmin:
    """One cluster's consumer groups; every call names the cluster when it fails."""

    def __init__(
        self, cluster: ClusterConfig, *, timeout: float = 10.0, cache_topics: bool = False
    ) -> None:
        """`cache_topics`: the first topic metadata read serves every later call (many groups
        planned in a row against one cluster whose topics do not change meanwhile)."""
        self.cluster = cluster
        self._timeout = timeout
        self._admin = clients.admin_client(cluster.admin_config())
        self._cache_topics = cache_topics
        self._topics: dict[str, Any] | None = None

    def _call(self, request: Callable[[], Any], what: str) -> Any:
        """`request()` returns a future; retried while the broker says "try again"."""
        return self._retrying(lambda: request().result(self._timeout + 5), what)

    def _retrying(self, action: Callable[[], Any], what: str) -> Any:
        """`action()`, again while the broker says "try again"; its Kafka errors in ferry's."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return action()
            except (KafkaException, TimeoutError) as exc:
                error = kafka_error_of(exc)
                if error is not None and error.code() in _RETRY and time.monotonic() < deadline:
                    time.sleep(0.2)  # e.g. a new coordinator still loading its groups
                    continue
                if error is None or error.code() in UNREACHABLE_CODES:
                    raise unavailable(self.cluster, exc) from None
                raise FerryError(
                    f"cluster {self.cluster.alias}: could not {what}: {error.name()}: {error.str()}"
                ) from None

    def list_topics(self) -> dict[str, Any]:
        """Topic metadata by name (raises KafkaException if the cluster does not answer)."""
        if self._topics is not None:
            return self._topics
        topics: dict[str, Any] = self._admin.list_topics(timeout=self._timeout).topics
        if self._cache_topics:
            self._topics = topics
        return topics

    def groups(self) -> list[str]:
        result = self._call(
            lambda: self._admin.list_consumer_groups(request_timeout=self._timeout),
            "list consumer groups",
        )
        return sorted(str(listing.group_id) for listing in result.valid)

    def committed(
        self, group: str, partitions: Collection[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, int]:
        """Every offset `group` committed (next record to read) in this cluster's topics, by
        topic and partition (only of `partitions` when given: no metadata read then): read by
        a consumer of the group (kafka/group_offsets.py says why never by the admin API)."""
        try:
            offsets: dict[TopicPartitionKey, int] = self._retrying(
                lambda: read_group_offsets(self.cluster, group, partitions, timeout=self._timeout),
                f"read the offsets of group {group}",
            )
        except GroupOffsetError as exc:
            raise FerryError(
                f"cluster {self.cluster.alias}: could not read the offset of group {group} "
                f"for {exc.tp[0]} partition {exc.tp[1]}: {exc.error}"
            ) from None
        return offsets

    def state(self, group: str) -> GroupState:
        description = self._call(
            lambda: self._admin.describe_consumer_groups([group], request_timeout=self._timeout)[
                group
            ],
            f"describe group {group}",
        )
        state = getattr(description.state, "name", str(description.state))
        members = tuple(str(m.client_id or m.member_id) for m in (description.members or ()))
        return GroupState(group, state, members)

    def _alter(self, group: str, partitions: list[TopicPartition]) -> Any:
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        return self._admin.alter_consumer_group_offsets(request, request_timeout=self._timeout)[
            group
        ]

    def commit(self, group: str, offsets: dict[TopicPartitionKey, int]) -> None:
        """Set `group`'s committed offsets; the brokers refuse if the group has members."""
        if not offsets:
            return
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        failed = []
        for batch in batches(partitions, MAX_OFFSETS_PARTITIONS_PER_REQUEST):
            result = self._call(
                partial(self._alter, group, batch), f"commit offsets for group {group}"
            )
            failed += [tp for tp in result.topic_partitions or () if tp.error is not None]
        if failed:
            tp = failed[0]
            raise FerryError(
                f"cluster {self.cluster.alias}: could not commit group {group} at "
                f"{tp.topic} partition {tp.partition}: {tp.error}"
            )
