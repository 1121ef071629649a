"""Applies a change to a running flow: checks it, records it, makes the planner act on it.

A change is recorded first in the control topic (when `api.control.cluster` is set, so it
survives a restart; see control/log.py), then in the flow's state dir (`control.json`, which
the planner reads at every lease or batch), and then the flow's replan marker is left so the
running lease ends after its current slice and the next one is planned with the change: a
change acts within a few seconds, not at the end of a 10-minute lease. A change that changes
nothing (pausing a paused flow) records nothing and says nothing; every other one is said once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from confluent_kafka import KafkaException

from ferry.config.model import FerryConfig, FlowConfig
from ferry.control.log import ControlLog
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.errors import FerryError, RejectedChangeError, UnknownFlowError
from ferry.flows.control import FlowControl
from ferry.graph.guard import new_errors
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import unavailable
from ferry.policy import policy_for

__all__ = ["Controller", "cluster_topics"]

ClusterTopics = Callable[[FerryConfig, str], set[str]]


def cluster_topics(config: FerryConfig, alias: str) -> set[str]:
    """The topics on a cluster now."""
    cluster = config.clusters[alias]
    try:
        metadata = clients.admin_client(cluster.admin_config()).list_topics(timeout=15)
    except KafkaException as exc:
        raise unavailable(cluster, exc) from None
    return {name for name, md in metadata.topics.items() if md.error is None}


class Controller:
    def __init__(
        self,
        config: FerryConfig,
        notice: Callable[[str], None],
        *,
        log: ControlLog | None = None,
        topics: ClusterTopics = cluster_topics,
    ) -> None:
        self.config = config
        self.log = log
        self._notice = notice
        self._topics = topics
        self._lock = threading.Lock()
        self.flows = {f.name: f for f in config.enabled_flows}
        root = config.state_dir.resolve()
        self.states = {f.name: FlowState(flow_state_dir(root, f)) for f in config.enabled_flows}

    @classmethod
    def of(cls, config: FerryConfig, notice: Callable[[str], None]) -> Controller:
        """With the control topic `api.control.*` names, if any."""
        api = config.api
        log = None
        if api.control_cluster is not None:
            log = ControlLog(config.clusters[api.control_cluster], api.control_topic)
        return cls(config, notice, log=log)

    # --- start ----------------------------------------------------------------------------

    def restore(self) -> dict[str, FlowControl]:
        """Each enabled flow's override as the control topic last recorded it (none without
        a control topic: then the file alone counts), written where the planner reads it.
        Runs before anything copies, so a restart replicates what the API last said."""
        saved = self.log.read() if self.log is not None else {}
        restored: dict[str, FlowControl] = {}
        for name, state in self.states.items():
            control = saved.get(name, FlowControl())
            state.write_control(control)
            restored[name] = control
            if not control.empty and self.log is not None:
                self._notice(
                    f"flow {name}: {describe(control)}, as recorded in {self.log.topic} on "
                    f"{self.log.cluster.alias}"
                )
        return restored

    # --- reading ----------------------------------------------------------------------------

    def flow(self, source: str, target: str) -> FlowConfig:
        name = f"{source}->{target}"
        if name not in self.flows:
            running = ", ".join(self.flows) or "none"
            raise UnknownFlowError(f"no running flow {name} (running: {running})")
        return self.flows[name]

    def control(self, flow: FlowConfig) -> FlowControl:
        return self.states[flow.name].control()

    # --- changes ----------------------------------------------------------------------------

    def add_topic(self, source: str, target: str, topic: str) -> FlowControl:
        flow = self.flow(source, target)
        policy = policy_for(flow.policy, flow.source)
        if policy.is_internal_topic(topic):
            raise RejectedChangeError(
                f"topic {topic} is internal (Kafka's, MirrorMaker's or ferry's own "
                "bookkeeping) and is never replicated"
            )
        if policy.is_cycle(topic, flow.target):
            raise RejectedChangeError(
                f"topic {topic} came from {flow.target}; copying it back there would loop"
            )
        if topic not in self._topics(self.config, flow.source):
            raise RejectedChangeError(
                f"topic {topic} does not exist on {flow.source} "
                f"({self.config.clusters[flow.source].bootstrap_servers}); create it there first"
            )
        self._check_graph(flow, self.control(flow).add(topic))
        return self._change(flow, lambda c: c.add(topic), f"topic {topic} added")

    def _check_graph(self, flow: FlowConfig, changed: FlowControl) -> None:
        """Refuse a change that would make a topic reach a remote topic twice or go round a
        cycle (the check `ferry validate` makes, over real topics and every flow's override).
        A cluster that does not answer is left out: its flows' copying reports it."""
        topics: dict[str, set[str]] = {}
        for alias in self.config.clusters:
            try:
                topics[alias] = self._topics(self.config, alias)
            except FerryError:
                continue
        controls = {name: state.control() for name, state in self.states.items()}
        added = new_errors(self.config, topics, controls, flow.name, changed)
        if added:
            raise RejectedChangeError(f"{added[0].message} (nothing was changed)")

    def remove_topic(self, source: str, target: str, topic: str) -> FlowControl:
        flow = self.flow(source, target)
        policy = policy_for(flow.policy, flow.source)
        if policy.is_heartbeats_topic(topic):
            raise RejectedChangeError(
                f"topic {topic} carries heartbeats, which always travel: they measure the "
                "flow's latency"
            )
        selector = TopicSelector(flow, policy, self.control(flow))
        if not selector.accepts(topic):
            raise RejectedChangeError(f"flow {flow.name} does not copy topic {topic}")
        return self._change(
            flow, lambda c: c.remove(topic), f"topic {topic} removed (its copy stays)"
        )

    def pause(self, source: str, target: str) -> FlowControl:
        flow = self.flow(source, target)
        return self._change(flow, FlowControl.pause, "paused")

    def resume(self, source: str, target: str) -> FlowControl:
        flow = self.flow(source, target)
        return self._change(flow, FlowControl.resume, "resumed")

    def _change(
        self, flow: FlowConfig, change: Callable[[FlowControl], FlowControl], said: str
    ) -> FlowControl:
        with self._lock:
            state = self.states[flow.name]
            old = state.control()
            new = change(old)
            if new == old:
                return old
            if self.log is not None:
                self.log.write(flow.name, new)  # first: a change answered 200 survives a crash
            state.write_control(new)
            state.directory.mkdir(parents=True, exist_ok=True)
            state.replan_marker.touch()  # the running lease ends; the next one has the change
            self._notice(f"flow {flow.name}: {said} over the API")
            return new

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def describe(control: FlowControl) -> str:
    """One line for a person: what the override changes."""
    parts = []
    if control.paused:
        parts.append("paused")
    if control.added:
        parts.append("topics added: " + ", ".join(sorted(control.added)))
    if control.removed:
        parts.append("topics removed: " + ", ".join(sorted(control.removed)))
    return "; ".join(parts) or "as the config file says"
