"""Topic config sync: the source's topic settings follow to the remote topics, while running.

`TopicManager` copies configs when it creates a remote topic; this keeps them in step after
(MM2's `sync.topic.configs.enabled`). Every setting made on the source topic itself goes
over (values inherited from the brokers stay each side's own), except
`config.properties.exclude` (whole-name regexes): those are the target's own business,
such as `min.insync.replicas`, which depends on the target's broker count. Only the keys
whose values differ are set, one at a time (`incremental_alter_configs`), so a setting
someone made on the target for an excluded key is left alone. A remote topic with more
partitions than its source is reported: partitions are only ever added, never removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__: not re-exported
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.admin_batches import (
    MAX_CONFIG_RESOURCES_PER_REQUEST,
    MAX_RECORDS_PER_CONTROLLER_REQUEST,
    submit,
)
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, kafka_errors, unavailable
from ferry.sync.checkpoints import SyncReport

__all__ = ["TopicConfigSync", "config_changes"]


def config_changes(
    source: Mapping[str, str], remote: Mapping[str, str], exclude: Iterable[re.Pattern[str]]
) -> dict[str, str]:
    """The source settings to set on the remote topic: not excluded, and not already equal."""
    patterns = list(exclude)
    return {
        name: value
        for name, value in sorted(source.items())
        if remote.get(name) != value and not any(p.fullmatch(name) for p in patterns)
    }


class TopicConfigSync:
    """One flow's config sync; `sync()` is one pass over every selected topic."""

    def __init__(
        self,
        config: FerryConfig,
        flow: FlowConfig,
        *,
        timeout: float = 15.0,
        source_admin: Any = None,
        target_admin: Any = None,
    ) -> None:
        self.flow = flow
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.replication_policy
        self.selector = TopicSelector(flow, self.policy)
        self._exclude = [re.compile(p) for p in flow.config_properties_exclude]
        self._timeout = timeout
        self._source_admin = source_admin or clients.admin_client(self.source.admin_config())
        self._target_admin = target_admin or clients.admin_client(self.target.admin_config())
        self._told: set[tuple[str, int, int]] = set()  # partition notices already given
        self._notes: list[str] = []  # what this pass could not do, for its report

    def sync(self) -> SyncReport:
        self._notes = []
        source_topics = self._topics(self.source, self._source_admin)
        target_topics = self._topics(self.target, self._target_admin)
        pairs: dict[str, str] = {}
        notices: list[str] = []
        for topic, partitions in sorted(source_topics.items()):
            if not self.selector.accepts(topic):
                continue
            remote = self.policy.remote_topic(self.flow.source, topic)
            if remote not in target_topics:
                continue  # not created yet: creation copies the configs
            pairs[topic] = remote
            extra = (remote, target_topics[remote], partitions)
            if target_topics[remote] > partitions and extra not in self._told:
                self._told.add(extra)
                notices.append(
                    f"topic {remote} on {self.target.alias} has {extra[1]} partitions, its "
                    f"source {topic} on {self.source.alias} {partitions}: partitions are never "
                    "removed; records keep their partition numbers, the extra ones stay empty"
                )
        if not pairs:
            return SyncReport(0, 0, tuple(notices))
        source_configs = self._describe(self.source, self._source_admin, list(pairs))
        remote_configs = self._describe(self.target, self._target_admin, list(pairs.values()))
        changes = {
            remote: config_changes(
                {k: v for k, v in source_configs.get(topic, {}).items() if v is not None},
                {k: v for k, v in remote_configs.get(remote, {}).items() if v is not None},
                self._exclude,
            )
            for topic, remote in pairs.items()
            if topic in source_configs and remote in remote_configs
        }
        changes = {remote: keys for remote, keys in changes.items() if keys}
        notices += self._notes + self._alter(changes)
        return SyncReport(len(pairs), sum(len(keys) for keys in changes.values()), tuple(notices))

    def _topics(self, cluster: ClusterConfig, admin: Any) -> dict[str, int]:
        with kafka_errors(cluster, "list topics"):
            topics = admin.list_topics(timeout=self._timeout).topics
        return {name: len(md.partitions) for name, md in topics.items() if md.error is None}

    def _describe(
        self, cluster: ClusterConfig, admin: Any, topics: list[str]
    ) -> dict[str, dict[str, str | None]]:
        """Each topic's own settings (a topic gone meanwhile: none).

        Topic-level values only, as MM2 does since Kafka 3.7 (`use.defaults.from=target`):
        a value the source inherits from its brokers is the source's business, and copying
        it would pin the target topic to the source's broker defaults.

        On the source that is what to copy; on the target, what is there to compare with.
        """
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        found: dict[str, dict[str, str | None]] = {}
        futures = submit(admin.describe_configs, resources, MAX_CONFIG_RESOURCES_PER_REQUEST)
        for resource, future in futures.items():
            try:
                entries = future.result(self._timeout)
            except KafkaException as exc:  # per code: goes on past a topic gone or refused
                error = kafka_error_of(exc)
                if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue
                if error is None or error.code() in UNREACHABLE_CODES:
                    raise unavailable(cluster, exc) from None
                self._notes.append(
                    f"topic {resource.name} on {cluster.alias}: could not read its configs: "
                    f"{error.name()}: {error.str()}; grant ferry's principal DESCRIBE_CONFIGS"
                )
                continue
            found[resource.name] = {
                name: entry.value
                for name, entry in entries.items()
                if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                and not entry.is_sensitive
            }
        return found

    def _alter(self, changes: dict[str, dict[str, str]]) -> list[str]:
        if not changes:
            return []
        resources = [
            ConfigResource(
                ConfigResource.Type.TOPIC,
                remote,
                incremental_configs=[
                    ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                    for name, value in keys.items()
                ],
            )
            for remote, keys in changes.items()
        ]
        refused = []
        # A changed setting is a controller record: at most so many settings per request.
        futures = submit(
            self._target_admin.incremental_alter_configs,
            resources,
            min(MAX_CONFIG_RESOURCES_PER_REQUEST, MAX_RECORDS_PER_CONTROLLER_REQUEST),
            lambda resource: len(resource.incremental_configs),
        )
        for resource, future in futures.items():
            try:
                future.result(self._timeout)
            except KafkaException as exc:  # a refusal is reported and the sync goes on
                error = kafka_error_of(exc)
                if error is None or error.code() in UNREACHABLE_CODES:
                    raise unavailable(self.target, exc) from None
                keys = ", ".join(f"{k}={v}" for k, v in changes[resource.name].items())
                refused.append(
                    f"topic {resource.name} on {self.target.alias} refused {keys}: "
                    f"{error.name()}: {error.str()}; add the key to config.properties.exclude "
                    "to stop copying it, or let ferry's principal ALTER_CONFIGS the topic"
                )
        return refused
