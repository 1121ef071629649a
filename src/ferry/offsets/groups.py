"""Consumer groups: list, check activity (through the admin API), read offsets and commit them
(through a consumer of the group: kafka/group_offsets.py says why not through the admin API;
one-shot commands committing many groups in a row may choose the admin API's commits)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.errors import FerryError
from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, batches
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable
from ferry.kafka.group_offsets import GroupOffsetError, commit_group_offsets, read_group_offsets
from ferry.kafka.offsets_log_reader import OffsetsLogIndex

__all__ = ["GroupActiveError", "GroupAdmin", "GroupState", "group_filter"]

TopicPartitionKey = tuple[str, int]

# Answers that mean "ask again in a moment".
_RETRY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)

# A coordinator's refusals of a commit from outside the group (generation -1, no member id)
# while the group has members (classic protocol, or KIP-848's consumer protocol).
_HAS_MEMBERS = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.STALE_MEMBER_EPOCH,
    }
)


class GroupActiveError(FerryError):
    """The coordinator refused to commit a group's offsets: the group has members."""

    def __init__(self, cluster: str, group: str, error: KafkaError) -> None:
        super().__init__(
            f"cluster {cluster}: group {group} has active members: its coordinator refused "
            f"the commit ({error.name()}); offsets can only be committed for a group with no "
            "members"
        )
        self.group = group


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
        self,
        cluster: ClusterConfig,
        *,
        timeout: float = 10.0,
        cache_topics: bool = False,
        on_error: Callable[[KafkaError], None] | None = None,
        commits: OffsetsLogIndex | None = None,
        admin_commits: bool = False,
    ) -> None:
        """`cache_topics`: the first topic metadata read serves every later call (many groups
        planned in a row against one cluster whose topics do not change meanwhile).
        `on_error`: librdkafka's error callback (`error_cb`), called on each client-wide
        error while the client is polled (`poll`). `commits`: each group's partitions with an
        offset, read from the cluster's `__consumer_offsets` by the caller (refreshed when it
        chooses): `committed` then asks a group for those partitions alone, of the ones it
        would ask otherwise. `admin_commits`: `commit` through the admin API, one client for
        every group, instead of a consumer of each group (about a sixth of its time a group,
        measured: what a failover or a switchover of a thousand groups needs). Only for
        one-shot commands: an admin request to a group's coordinator can abort the process
        when that coordinator's connection drops as the request is sent (librdkafka 2.16), a
        command run again, never ferry run."""
        self.cluster = cluster
        self._commits = commits
        self._timeout = timeout
        settings: dict[str, Any] = dict(cluster.admin_config())
        if on_error is not None:
            settings = {**settings, "error_cb": on_error}
        self._admin = clients.admin_client(settings)
        self._cache_topics = cache_topics
        self._admin_commits = admin_commits
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

    def poll(self) -> None:
        """Serve the client's callbacks (`on_error`) now."""
        self._admin.poll(0)

    def list_topics(self, timeout: float | None = None) -> dict[str, Any]:
        """Topic metadata by name (raises KafkaException if the cluster does not answer
        within `timeout`, the client's when None)."""
        if self._topics is not None:
            return self._topics
        wait = self._timeout if timeout is None else timeout
        topics: dict[str, Any] = self._admin.list_topics(timeout=wait).topics
        if self._cache_topics:
            self._topics = topics
        return topics

    def _every_partition(self) -> list[TopicPartitionKey]:
        """Every partition of the cluster's topics but its internal `__` ones, as
        `read_group_offsets` lists them."""
        return [
            (name, p)
            for name, topic in sorted(self.list_topics().items())
            if topic.error is None and not name.startswith("__")
            for p in sorted(topic.partitions)
        ]

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
        a consumer of the group (kafka/group_offsets.py says why never by the admin API).
        With `cache_topics`, every partition is taken from the topics read once, not from a
        metadata read per group."""

        def read() -> dict[TopicPartitionKey, int]:
            wanted = partitions
            if wanted is None and (self._cache_topics or self._commits is not None):
                wanted = self._every_partition()
            known = None if self._commits is None else self._commits.partitions_of(group)
            if known is not None and wanted is not None:
                wanted = [tp for tp in wanted if tp in known]
            return read_group_offsets(self.cluster, group, wanted, timeout=self._timeout)

        try:
            offsets: dict[TopicPartitionKey, int] = self._retrying(
                read, f"read the offsets of group {group}"
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

    def commit(self, group: str, offsets: dict[TopicPartitionKey, int]) -> None:
        """Set `group`'s committed offsets, through a consumer of the group that never joins
        it (or the admin API: `admin_commits`). Raises GroupActiveError when the coordinator
        refuses because the group has members (nothing of that request was committed)."""
        if not offsets:
            return
        alias = self.cluster.alias

        def commit() -> None:
            try:
                if self._admin_commits:
                    self._alter(group, offsets)
                else:
                    commit_group_offsets(self.cluster, group, offsets, timeout=self._timeout)
            except KafkaException as exc:
                error = kafka_error_of(exc)
                if error is not None and error.code() in _HAS_MEMBERS:
                    raise GroupActiveError(alias, group, error) from None
                raise
            except GroupOffsetError as exc:
                code = exc.error.code()
                if code in _HAS_MEMBERS:
                    raise GroupActiveError(alias, group, exc.error) from None
                if code in _RETRY:  # a coordinator moving: asked again by _retrying
                    raise KafkaException(exc.error) from None
                raise FerryError(
                    f"cluster {alias}: could not commit group {group} at {exc.tp[0]} "
                    f"partition {exc.tp[1]}: {exc.error}"
                ) from None

        self._retrying(commit, f"commit offsets for group {group}")

    def _alter(self, group: str, offsets: dict[TopicPartitionKey, int]) -> None:
        """The admin API's commit, in batches; raises what commit_group_offsets raises."""
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        for batch in batches(partitions, MAX_OFFSETS_PARTITIONS_PER_REQUEST):
            request = [ConsumerGroupTopicPartitions(group, batch)]
            future = self._admin.alter_consumer_group_offsets(
                request, request_timeout=self._timeout
            )[group]
            for tp in future.result(self._timeout + 5).topic_partitions or ():
                if tp.error is not None:
                    raise GroupOffsetError((tp.topic, tp.partition), tp.error)
