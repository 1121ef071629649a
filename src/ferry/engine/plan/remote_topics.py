"""Remote topics: find what a flow copies and make sure the target has somewhere to put it.

The planner calls `TopicManager.sync()` before it plans any batch that includes a topic, so a
record is never produced to a topic that does not exist (the brokers would auto-create it with
the wrong partition count, or refuse). Creation copies the source's partition count,
`cleanup.policy` and every other topic-level setting except `config.properties.exclude`; a
source that gained partitions gets them on the target too. The target never shrinks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__: not re-exported
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.errors import KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.admin_batches import (
    MAX_CONFIG_RESOURCES_PER_REQUEST,
    MAX_OFFSETS_PARTITIONS_PER_REQUEST,
    MAX_PARTITIONS_PER_CREATE,
    MAX_RECORDS_PER_CONTROLLER_REQUEST,
    create_weight,
    submit,
)
from ferry.kafka.errors import kafka_error_of, kafka_errors
from ferry.policy import ReplicationPolicy

__all__ = ["RemoteTopic", "TopicManager"]

TP = tuple[str, int]

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's broker default, used if a describe says nothing
# How much longer to wait, per partition the target's broker does not know yet, for it to know
# new remote topics (on top of the timeout): 10,000 partitions, 200 s more.
NEW_PARTITION_SECONDS = 0.02


@dataclass(frozen=True)
class RemoteTopic:
    """A selected source topic and its copy on the target, ready to receive records."""

    topic: str
    remote_topic: str
    partitions: int
    max_message_bytes: int


class TopicManager:
    def __init__(
        self,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        *,
        source_admin: Any = None,
        target_admin: Any = None,
        timeout: float = 15.0,
        control: Callable[[], FlowControl] | None = None,
    ) -> None:
        """`control`: the flow's runtime override, read at every selection (see
        ferry.control); None for what the file says alone."""
        self.flow = flow
        self.source = source
        self.target = target
        self.policy: ReplicationPolicy = flow.replication_policy
        self.selector = TopicSelector(flow, self.policy)
        self._control = control
        self._source_admin = source_admin or clients.admin_client(source.admin_config())
        self._target_admin = target_admin or clients.admin_client(target.admin_config())
        self._timeout = timeout
        self._exclude = [re.compile(p) for p in flow.config_properties_exclude]

    @property
    def source_admin(self) -> Any:
        """The admin client of the source cluster this manager reads."""
        return self._source_admin

    # --- metadata -------------------------------------------------------------------------

    def _metadata(self, cluster: ClusterConfig, admin: Any) -> Any:
        with kafka_errors(cluster, "list topics"):
            return admin.list_topics(timeout=self._timeout)

    def cluster_ids(self) -> tuple[str, str]:
        source = self._metadata(self.source, self._source_admin).cluster_id
        target = self._metadata(self.target, self._target_admin).cluster_id
        return str(source), str(target)

    def end_offsets(self, topics: dict[str, int], which: str = "latest") -> dict[TP, int]:
        """Each partition's last stable offset (read_committed: open transactions are not
        counted), or with `which="earliest"` its first retained offset, on the source."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # no __all__: not re-exported

        # ignore: OffsetSpec.latest/earliest are unannotated in confluent-kafka 2.16.
        spec = OffsetSpec.latest() if which == "latest" else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        request = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        futures = submit(
            lambda batch: self._source_admin.list_offsets(
                dict.fromkeys(batch, spec),
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=15,
            ),
            request,
            MAX_OFFSETS_PARTITIONS_PER_REQUEST,
        )
        ends: dict[TP, int] = {}
        for tp, future in futures.items():
            with kafka_errors(self.source, f"read the end of {tp.topic} partition {tp.partition}"):
                ends[(tp.topic, tp.partition)] = future.result().offset
        return ends

    def remote_topics_present(self) -> set[str]:
        """The topics the target has now (remote topics among them)."""
        return set(self._metadata(self.target, self._target_admin).topics)

    def selected(self) -> dict[str, int]:
        """The source topics the flow copies, with their partition counts."""
        source_md = self._metadata(self.source, self._source_admin)
        selector = self.selector
        if self._control is not None:
            selector = TopicSelector(self.flow, self.policy, self._control())
        return {
            name: len(md.partitions)
            for name, md in source_md.topics.items()
            if md.error is None and selector.accepts(name)
        }

    def sync(self) -> dict[str, RemoteTopic]:
        """Select source topics, create or expand their remote topics; return the ready ones."""
        selected = self.selected()
        target_md = self._metadata(self.target, self._target_admin)
        remote = {name: self.policy.remote_topic(self.flow.source, name) for name in selected}
        missing = [t for t in selected if remote[t] not in target_md.topics]
        if missing:
            self._create(missing, remote, selected)
        grow: dict[str, tuple[int, int]] = {}
        for topic, partitions in selected.items():
            existing = target_md.topics.get(remote[topic])
            if existing is not None and len(existing.partitions) < partitions:
                grow[remote[topic]] = (len(existing.partitions), partitions)
        if grow:
            self._expand(grow)
        limits = self._max_message_bytes({remote[t]: n for t, n in selected.items()})
        return {
            t: RemoteTopic(t, remote[t], n, limits.get(remote[t], DEFAULT_MAX_MESSAGE_BYTES))
            for t, n in selected.items()
        }

    # --- creating ---------------------------------------------------------------------------

    def _configs_to_copy(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """Each source topic's settings a remote topic is created with.

        A topic the source's metadata listed can be unknown to the broker that answers its
        configs: created a moment ago (on a cluster of several brokers, each learns of it in
        its own time) or deleted since. Such topics are asked again for `timeout`; then it is
        a KafkaUnavailableError, which the flow asks again after its backoff (a deleted topic
        is no longer listed then), never a failed run."""
        copied: dict[str, dict[str, str]] = {}
        pending = list(topics)
        deadline = time.monotonic() + self._timeout
        while pending:
            known, pending, unknown = self._describe(self.source, self._source_admin, pending)
            copied.update({name: self._copied_settings(e) for name, e in known.items()})
            if pending and time.monotonic() >= deadline:
                raise KafkaUnavailableError(
                    self.source.alias,
                    self.source.bootstrap_servers,
                    f"topic {pending[0]}, listed in its metadata, is not known to the broker "
                    f"that answers its settings after {self._timeout:.0f} s (created a moment "
                    "ago, or deleted since); asking again",
                    what="does not know a topic it listed",
                ) from unknown
            if pending:
                time.sleep(0.2)
        return copied

    def _describe(
        self, cluster: ClusterConfig, admin: Any, topics: list[str]
    ) -> tuple[dict[str, dict[str, Any]], list[str], KafkaException | None]:
        """One DescribeConfigs of `topics` (in batches): each known topic's entries, the
        topics the answering broker does not know (UNKNOWN_TOPIC_OR_PART) with the last such
        error; any other error raised as ferry's, naming the cluster and topic."""
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        futures = submit(admin.describe_configs, resources, MAX_CONFIG_RESOURCES_PER_REQUEST)
        known: dict[str, dict[str, Any]] = {}
        unknown: list[str] = []
        last: KafkaException | None = None
        for resource, future in futures.items():
            with self._errors(cluster, resource.name, "describe topic"):
                try:
                    known[resource.name] = future.result(self._timeout)
                except KafkaException as exc:
                    error = kafka_error_of(exc)
                    if error is None or error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise
                    unknown.append(resource.name)
                    last = exc
        return known, unknown, last

    def _copied_settings(self, entries: dict[str, Any]) -> dict[str, str]:
        return {
            name: entry.value
            for name, entry in entries.items()
            if entry.value is not None
            and not entry.is_sensitive
            and (
                entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value or name == "cleanup.policy"
            )
            and not any(p.fullmatch(name) for p in self._exclude)
        }

    def _create(
        self, topics: list[str], remote: dict[str, str], partitions: dict[str, int]
    ) -> None:
        configs = self._configs_to_copy(topics)
        new = [
            NewTopic(
                remote[t],
                num_partitions=partitions[t],
                replication_factor=self.flow.replication_factor,
                config=configs.get(t, {}),
            )
            for t in topics
        ]
        # Within the controller's limits per request: partitions and metadata records.
        futures = submit(
            self._target_admin.create_topics,
            new,
            MAX_RECORDS_PER_CONTROLLER_REQUEST,
            lambda topic: create_weight(topic.num_partitions, list(topic.config or {})),
        )
        for name, future in futures.items():
            # TOPIC_ALREADY_EXISTS: created meanwhile by another run, fine.
            with self._errors(
                self.target, name, "create topic", done={KafkaError.TOPIC_ALREADY_EXISTS}
            ):
                future.result(self._timeout)

    def _expand(self, grow: dict[str, tuple[int, int]]) -> None:
        """Each remote topic from its partition count to the source's (`grow`: from, to)."""
        futures = submit(
            self._target_admin.create_partitions,
            [NewPartitions(topic, to) for topic, (_from, to) in grow.items()],
            MAX_PARTITIONS_PER_CREATE,
            lambda new: new.new_total_count - grow[new.topic][0],
        )
        for name, future in futures.items():
            # INVALID_PARTITIONS: it already has them (expanded meanwhile).
            with self._errors(
                self.target, name, "add partitions to topic", done={KafkaError.INVALID_PARTITIONS}
            ):
                future.result(self._timeout)

    def ensure_internal_topic(
        self,
        name: str,
        replication_factor: int,
        key: str = "offset-syncs.topic.replication.factor",
    ) -> None:
        """A single-partition compacted bookkeeping topic on the target (runs, checkpoints)."""
        if name in self._metadata(self.target, self._target_admin).topics:
            return
        new = NewTopic(
            name,
            num_partitions=1,
            replication_factor=replication_factor,
            config={"cleanup.policy": "compact"},
        )
        for topic, future in self._target_admin.create_topics([new]).items():
            with self._errors(
                self.target, topic, "create topic", key=key, done={KafkaError.TOPIC_ALREADY_EXISTS}
            ):
                future.result(self._timeout)

    def _max_message_bytes(self, partitions: dict[str, int]) -> dict[str, int]:
        """Each remote topic's max.message.bytes on the target (`partitions`: remote topic,
        partition count), waiting for those the broker answering does not know yet.

        The controller accepted them (this run or another created them a moment ago), but a
        broker creates thousands of new partitions' logs over many seconds (10,000 on 2
        cores: up to a minute and more), so the wait grows with the partitions not known yet,
        and runs again from every topic that became known. A topic still not known after it
        is a KafkaUnavailableError: the flow asks again after its backoff, never fails."""
        if not partitions:
            return {}
        limits: dict[str, int] = {}
        pending = list(partitions)
        waiting = len(pending)
        allowance = self._timeout
        deadline: float | None = None  # set after the first round, from what was unknown
        while pending:
            known, pending, unknown = self._describe(self.target, self._target_admin, pending)
            for name, entries in known.items():
                entry = entries.get("max.message.bytes")
                if entry is not None and entry.value is not None:
                    limits[name] = int(entry.value)
            if pending and deadline is not None and time.monotonic() >= deadline:
                # Not a refusal: a busy broker still creating thousands of logs gets there;
                # the flow asks again after a backoff, saying so each time.
                raise KafkaUnavailableError(
                    self.target.alias,
                    self.target.bootstrap_servers,
                    f"topic {pending[0]}, which its controller accepted, is not known to the "
                    f"broker that answers after {allowance:.0f} s; asking again. If this "
                    "repeats, the broker's log says why (a broker that cannot create its "
                    "partitions' logs: disk, open files)",
                    what="is still creating topics",
                ) from unknown
            if pending:
                now = time.monotonic()
                if deadline is None:
                    unknown_partitions = sum(partitions[t] for t in pending)
                    allowance = self._timeout + NEW_PARTITION_SECONDS * unknown_partitions
                    deadline = now + allowance
                elif len(pending) < waiting:
                    deadline = max(deadline, now + self._timeout)
                waiting = len(pending)
                time.sleep(0.2)
        return limits

    # --- errors -----------------------------------------------------------------------------

    def _errors(
        self,
        cluster: ClusterConfig,
        topic: str,
        action: str,
        key: str = "replication.factor",
        done: Collection[int] = (),
    ) -> AbstractContextManager[None]:
        fix = self._fix(cluster, topic, key)
        return kafka_errors(cluster, action, topic=topic, fix=fix, done=done)

    def _fix(
        self, cluster: ClusterConfig, topic: str, key: str = "replication.factor"
    ) -> Callable[[KafkaError], str]:
        """What to do about a refusal to create, describe or grow `topic`, by error code."""
        fixes = {
            "INVALID_REPLICATION_FACTOR": (
                f"set {key} (or {self.flow.name}.{key}) to at most the number of brokers "
                f"in {cluster.alias}, or -1 for the broker default"
            ),
            "TOPIC_AUTHORIZATION_FAILED": (
                f"grant ferry's principal on {cluster.alias} CREATE, ALTER and DESCRIBE_CONFIGS "
                f"on topic {topic}, or create the topic yourself"
            ),
            "CLUSTER_AUTHORIZATION_FAILED": (
                f"grant ferry's principal on {cluster.alias} CREATE on the cluster, "
                f"or create topic {topic} yourself"
            ),
        }

        def fix(error: KafkaError) -> str:
            if error.name() != "POLICY_VIOLATION":
                return fixes.get(error.name(), "see the broker's log for why it refused")
            if "partitions per request" in error.str():
                # ferry's requests stay under the limit: only a topic above it alone is refused.
                return (
                    f"{cluster.alias}'s controller creates at most {MAX_PARTITIONS_PER_CREATE} "
                    f"partitions per request; give the source topic of {topic} at most that many"
                )
            return (
                f"a topic policy of {cluster.alias} (create.topic.policy.class.name, "
                f"alter.config.policy.class.name) refused it; its broker's log says which rule"
            )

        return fix
