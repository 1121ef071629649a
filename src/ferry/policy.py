"""Replication policies: how a topic is named on the other side, and where a name came from.

Pure code, no I/O. As in MirrorMaker 2's `ReplicationPolicy`, each policy answers three
questions (`remote_topic`, `topic_source`, `upstream_topic`); the original topic, the internal
topic names and the cycle check all derive from them, so a policy cannot get them wrong.

Why the cycle check matters: with flows A->B and B->A, copying `A.orders` from B back to A
would create `B.A.orders`, then `A.B.A.orders`, forever. MM2's rule, kept here: a topic whose
chain of sources reaches the target cluster is never replicated to it. The identity policy
cannot see sources in names, so there loop prevention is per record, by provenance header.

Internal topics, MM2's `isInternalTopic`, are never replicated whatever a flow's lists say:
names starting with `__` or `.`, or ending in `-internal`, `.internal` or `<separator>internal`.
Heartbeats topics travel whatever the lists say, but, as in MM2, not when a name is internal.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

__all__ = [
    "HEARTBEATS_TOPIC",
    "IdentityPolicy",
    "PolicySpecLike",
    "PrefixPolicy",
    "RenamePolicy",
    "ReplicationPolicy",
    "policy_for",
]

HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicy(ABC):
    """Names remote topics; MM2's three abstract methods plus everything derived from them."""

    separator: str = "."

    @abstractmethod
    def remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of `topic` copied from cluster `source_alias`."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster `topic` was copied from, or None for a local topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of `topic` one hop upstream, or None for a local topic."""

    def original_topic(self, topic: str) -> str:
        """Name of the topic where its records were first produced, across any number of hops."""
        seen = {topic}
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream in seen:
                return topic
            seen.add(upstream)
            topic = upstream

    # Internal topic names: MM2's, so its client tools find what ferry writes.
    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def checkpoints_topic(self, source_alias: str) -> str:
        sep = self.separator
        return f"{source_alias}{sep}checkpoints{sep}internal"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self.separator
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def offset_runs_topic(self, source_alias: str) -> str:
        """ferry's exact offset runs of a flow from `source_alias`, kept in the target."""
        sep = self.separator
        return f"ferry-offset-runs{sep}{source_alias}{sep}internal"

    def consumer_timestamps_topic(self, source_alias: str) -> str:
        """The source's `__consumer_timestamps`, mirrored into the target by ferry."""
        sep = self.separator
        return f"ferry-consumer-timestamps{sep}{source_alias}{sep}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self.separator
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """MM2's and ferry's bookkeeping names (`mm2-offset-syncs.B.internal`,
        `A.checkpoints.internal`, `ferry-offset-runs.A.internal`): MM2's
        DefaultReplicationPolicy calls every name ending in `<separator>internal` one."""
        return topic.endswith(f"{self.separator}internal")

    def is_internal_topic(self, topic: str) -> bool:
        """MM2's `ReplicationPolicy.isInternalTopic`: internal topics are never replicated,
        whatever `topics` says. Copying one would hand another cluster's bookkeeping (its
        consumer offsets, a Connect worker's configs, MM2's checkpoints) to this one."""
        return (
            self.is_mm2_internal_topic(topic)
            or topic.startswith(("__", "."))
            or topic.endswith(("-internal", ".internal"))
        )

    def internal_rule(self, topic: str) -> str | None:
        """Why `topic` is internal, for a message ("its name ends in '-internal'"); None when
        it is not. The same tests as `is_internal_topic`."""
        if topic.startswith("__"):
            return "its name starts with '__', like Kafka's __consumer_offsets"
        if topic.startswith("."):
            return "its name starts with '.'"
        for suffix in (f"{self.separator}internal", ".internal", "-internal"):
            if topic.endswith(suffix):
                return f"its name ends in '{suffix}'"
        return None

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True when `topic` came, over any number of hops, from `target_alias`."""
        seen: set[str] = set()
        while topic not in seen:
            seen.add(topic)
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == target_alias:
                return True
            upstream = self.upstream_topic(topic)
            # The identity policy answers upstream == topic; stop instead of looping.
            if upstream is None or upstream == topic:
                return False
            topic = upstream
        return False

    def should_replicate(self, topic: str, target_alias: str) -> bool:
        """MM2's name-based rule: internal topics and cycles are never replicated.

        Heartbeats are replicated on purpose: they measure the latency of each hop.
        """
        if self.is_internal_topic(topic):
            return False
        return not self.is_cycle(topic, target_alias)


@dataclass(frozen=True)
class PrefixPolicy(ReplicationPolicy):
    """MM2's DefaultReplicationPolicy: `orders` from A becomes `A.orders`."""

    separator: str = "."

    def __post_init__(self) -> None:
        if not self.separator:
            raise ValueError("the replication policy separator must not be empty")

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        parts = topic.split(self.separator, 1)
        return parts[0] if len(parts) == 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]


@dataclass(frozen=True)
class IdentityPolicy(ReplicationPolicy):
    """MM2's IdentityReplicationPolicy: topics keep their names; heartbeats are still prefixed.

    Heartbeats keep the prefix so `replication_hops` can still see the topology; every other
    name says nothing about its source, so loops are stopped per record (provenance header).
    `source_alias` is the cluster a flow reads from, when the policy serves one flow.
    """

    source_alias: str | None = None
    separator: str = "."

    def _prefix(self) -> PrefixPolicy:
        return PrefixPolicy(self.separator)

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(HEARTBEATS_TOPIC)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return self._prefix().remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return self._prefix().topic_source(topic)
        return self.source_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return self._prefix().upstream_topic(topic)
        return topic


@dataclass(frozen=True)
class RenamePolicy(ReplicationPolicy):
    """Confluent Replicator's `topic.rename.format`, e.g. `${topic}.replica`.

    `${topic}` is required; `${source}` (the source alias) is optional. Without `${source}`
    a name cannot say where it came from, so every name that fits the format is treated as a
    copy and never copied again: otherwise A->B->A would grow `x.replica.replica...` forever.
    """

    rename_format: str
    separator: str = "."

    def __post_init__(self) -> None:
        if "${topic}" not in self.rename_format:
            raise ValueError(f"topic.rename.format '{self.rename_format}' lacks ${{topic}}")

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        pieces = re.split(r"(\$\{topic\}|\$\{source\})", self.rename_format)
        regex = ""
        for piece in pieces:
            if piece == "${topic}":
                regex += "(?P<topic>.+)"
            elif piece == "${source}":
                regex += "(?P<source>.+?)" if "(?P<source>" not in regex else "(?P=source)"
            else:
                regex += re.escape(piece)
        return re.compile(regex)

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return self.rename_format.replace("${source}", source_alias).replace("${topic}", topic)

    def topic_source(self, topic: str) -> str | None:
        match = self._pattern.fullmatch(topic)
        if match is None:
            return None
        return match.groupdict().get("source")

    def upstream_topic(self, topic: str) -> str | None:
        match = self._pattern.fullmatch(topic)
        return match.group("topic") if match else None

    def is_remote_name(self, topic: str) -> bool:
        return self._pattern.fullmatch(topic) is not None

    def should_replicate(self, topic: str, target_alias: str) -> bool:
        if "${source}" not in self.rename_format and self.is_remote_name(topic):
            return False
        return super().should_replicate(topic, target_alias)


class PolicySpecLike(Protocol):
    """What the config model says about a flow's policy (see ferry.config.PolicySpec)."""

    @property
    def kind(self) -> str: ...
    @property
    def separator(self) -> str: ...
    @property
    def rename_format(self) -> str | None: ...


def policy_for(spec: PolicySpecLike, source_alias: str | None = None) -> ReplicationPolicy:
    """Build the policy a flow's config asks for."""
    if spec.kind == "prefix":
        return PrefixPolicy(spec.separator)
    if spec.kind == "identity":
        return IdentityPolicy(source_alias, spec.separator)
    if spec.kind == "rename":
        if spec.rename_format is None:
            raise ValueError("a rename policy needs topic.rename.format")
        return RenamePolicy(spec.rename_format, spec.separator)
    raise ValueError(f"unknown replication policy kind {spec.kind!r}")
