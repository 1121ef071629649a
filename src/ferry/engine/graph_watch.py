"""The replication graph checked while ferry runs, over every cluster's real topics.

At load the graph is checked with example names; a topic created later can still complete
a double route or an unsafe cycle (a new topic that a narrow pattern of a second path
admits). So before the first copy and then every `refresh.topics.interval.seconds` (the
shortest of the enabled flows'), the driver lists every cluster's topics, asks
`ferry.graph.guard.refusals` which hops to hold back, and writes each flow's refused topics
into its state (`refused.json`), which the planner and the lease watch read with the API's
override. A flow whose refusals changed gets its replan marker, so a running lease ends after
its slice. Each error is said once, with the sentence naming both paths; every other topic and
flow goes on copying.

A cluster that does not answer is left out of the check (its flows report it): what it
holds cannot be followed until it answers again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from ferry.config.model import FerryConfig
from ferry.engine.flow_state import FlowState
from ferry.graph.guard import refusals
from ferry.kafka import clients

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["GraphWatch"]

ClusterTopics = Callable[[str], set[str] | None]  # None: the cluster did not answer


class GraphWatch:
    def __init__(
        self,
        config: FerryConfig,
        states: Mapping[str, FlowState],
        notice: Callable[[str], None],
        *,
        topics: ClusterTopics | None = None,
    ) -> None:
        self._config = config
        self._states = dict(states)
        self._notice = notice
        self._topics = topics or self._list_topics
        self._said: set[str] = set()
        self._admins: dict[str, AdminClient] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ferry-graph-watch", daemon=True)

    def check(self) -> dict[str, frozenset[str]]:
        """Check the graph now; returns each flow's refused topics (only flows with some)."""
        used = {a for f in self._config.enabled_flows for a in (f.source, f.target)}
        listed = {alias: self._topics(alias) for alias in sorted(used)}
        topics = {alias: names for alias, names in listed.items() if names is not None}
        controls = {name: state.control() for name, state in self._states.items()}
        found = refusals(self._config, topics, controls)
        for error in found.errors:
            if error.message not in self._said:
                self._said.add(error.message)
                held = ", ".join(
                    f"{flow} does not copy {', '.join(sorted(ts))}"
                    for flow, ts in sorted(found.topics.items())
                )
                self._notice(f"refused: {error.message}; held back: {held}; the rest copies on")
        for name, state in self._states.items():
            refused = found.of(name)
            if refused != state.refused():
                state.write_refused(refused)
                state.replan_marker.touch()
        return {name: ts for name, ts in found.topics.items() if ts}

    def start(self) -> GraphWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _interval(self) -> float:
        flows = [f for f in self._config.enabled_flows if f.refresh_topics_enabled]
        return float(max(1, min((f.refresh_topics_interval_seconds for f in flows), default=600)))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval()):
            self.check()

    def _list_topics(self, alias: str) -> set[str] | None:
        cluster = self._config.clusters[alias]
        admin = self._admins.get(alias) or clients.admin_client(cluster.admin_config())
        self._admins[alias] = admin
        try:
            metadata = admin.list_topics(timeout=5)
        except KafkaException:  # None: "not known now"; the next check asks again
            return None
        return {name for name, md in metadata.topics.items() if md.error is None}
