"""Which source topics a flow copies: MM2's include/exclude regexes plus its naming rules.

Pure code. Regexes match the whole name (MM2's DefaultTopicFilter). Internal topics (the
policy's `is_internal_topic`: `__x`, `.x`, `x-internal`, `x.internal`; Kafka's, Connect's,
MM2's, ferry's own) and topics that would copy data back to where it came from are never
selected, whatever the lists say; heartbeats topics are selected whatever the lists say. A
flow's runtime override (topics added or removed over the API) changes what the lists say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ferry.config.model import FlowConfig
from ferry.flows.override import FlowControl
from ferry.policy import ReplicationPolicy

__all__ = ["TopicSelector"]


class TopicSelector:
    def __init__(
        self, flow: FlowConfig, policy: ReplicationPolicy, control: FlowControl | None = None
    ) -> None:
        self._control = control or FlowControl()
        self._include = [re.compile(p) for p in flow.topics]
        self._exclude = [re.compile(p) for p in flow.topics_exclude]
        self._policy = policy
        self._target = flow.target

    def accepts(self, topic: str) -> bool:
        """MM2's rule: (the lists take it, or it is a heartbeats topic), and it is neither
        internal nor a cycle. Heartbeats always travel: they are how latency and hops are seen.
        """
        by_file = any(p.fullmatch(topic) for p in self._include) and not any(
            p.fullmatch(topic) for p in self._exclude
        )
        listed = self._control.listed(topic, by_file)
        if not (listed or self._policy.is_heartbeats_topic(topic)):
            return False
        return self._policy.should_replicate(topic, self._target)

    def select(self, topics: Iterable[str]) -> list[str]:
        return sorted(t for t in topics if self.accepts(t))
