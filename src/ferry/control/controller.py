"""Applies a change to a running flow: checks it, records it, makes the planner act on it.

A change is recorded first in the flow's control topic (on `api.control.cluster`, or else on
the flow's target cluster: see control/log.py), so it survives a restart; a change that topic
does not take is refused and changes nothing. Then it is written to the flow's state dir
(`control.json`, which the planner reads at every lease or batch), and then the flow's replan
marker is left so the running lease ends after its current slice and the next one is planned
with the change: a change acts within a few seconds, not at the end of a 10-minute lease. A
change that changes nothing (pausing a paused flow) records nothing and says nothing; every
other one is said once.

Other processes change flows too (`ferry switchover` writes the control topics directly):
`follow()`, called every few seconds while `ferry run` runs, reads what was written since and
acts on it the same way, and says which flows now run when a record turned one on or off (the
runner then starts or stops their queries; see engine/runner.py `reconfigure`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from ferry.config.model import FerryConfig, FlowConfig
from ferry.control.log import ControlLog, control_logs, read_logs, switchable_flows
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.errors import FerryError, RejectedChangeError, UnknownFlowError
from ferry.flows.override import FlowControl, effective_config
from ferry.graph.guard import new_errors
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors

__all__ = ["Controller", "cluster_topics"]

ClusterTopics = Callable[[FerryConfig, str], set[str]]


def cluster_topics(config: FerryConfig, alias: str) -> set[str]:
    """The topics on a cluster now."""
    cluster = config.clusters[alias]
    with kafka_errors(cluster, "list its topics"):
        metadata = clients.admin_client(cluster.admin_config()).list_topics(timeout=15)
    return {name for name, md in metadata.topics.items() if md.error is None}


class Controller:
    """`logs`: each flow's control log by flow name (`Controller.of` builds them from the
    config); a flow without one keeps its changes in its state dir only (tests)."""

    def __init__(
        self,
        config: FerryConfig,
        notice: Callable[[str], None],
        *,
        logs: Mapping[str, ControlLog] | None = None,
        standby: Mapping[str, ControlLog] | None = None,
        topics: ClusterTopics = cluster_topics,
    ) -> None:
        """`standby`: the control logs of flows the file disables that a record may turn on
        (the reverse of each enabled flow)."""
        self.config = config
        self.logs = dict(logs or {})
        self.standby = dict(standby or {})
        self._notice = notice
        self._topics = topics
        self._lock = threading.Lock()
        self.flows = {f.name: f for f in config.enabled_flows}  # the running flows
        root = config.state_dir.resolve()
        # Every flow a control record may turn on, with the state its planner reads.
        self.states = {f.name: FlowState(flow_state_dir(root, f)) for f in switchable_flows(config)}

    @classmethod
    def of(
        cls, config: FerryConfig, notice: Callable[[str], None], *, timeout: float = 15.0
    ) -> Controller:
        """Each enabled flow with its control topic: on `api.control.cluster` when set,
        else on the flow's target cluster. `timeout`: how long a read or write of a control
        topic waits for its cluster."""
        every = control_logs(config, switchable_flows(config), timeout=timeout)
        running = {f.name for f in config.enabled_flows}
        logs = {name: log for name, log in every.items() if name in running}
        standby = {name: log for name, log in every.items() if name not in running}
        return cls(config, notice, logs=logs, standby=standby)

    def _log(self, name: str) -> ControlLog | None:
        return self.logs.get(name) or self.standby.get(name)

    # --- start ----------------------------------------------------------------------------

    def restore(self) -> dict[str, FlowControl]:
        """Each enabled flow's override as its control topic last recorded it, written where
        the planner reads it. Runs before anything copies, so a restart replicates what the
        API last said. A control topic that cannot be read leaves its flows' state dir as
        the last run left it, and says so."""
        saved = self._read_logs()
        restored: dict[str, FlowControl] = {}
        for name, state in self.states.items():
            log = self._log(name)
            if log is None and name not in self.flows:
                continue  # a flow the file disables, with no control topic to turn it on
            recorded = saved[id(log)] if log is not None else {}
            if recorded is None:
                restored[name] = state.control()
                continue
            control = recorded.get(name, FlowControl())
            state.write_control(control)
            restored[name] = control
            if not control.empty and log is not None:
                self._notice(f"flow {name}: {describe(control)}, as recorded in {log.where}")
        self.flows = {f.name: f for f in self.effective().enabled_flows}
        return restored

    def effective(self) -> FerryConfig:
        """The config with each flow enabled as its control record says: what `ferry run`
        runs."""
        controls = {name: state.control() for name, state in self.states.items()}
        return effective_config(self.config, controls)

    def follow(self) -> FerryConfig | None:
        """Acts on what other processes recorded in the control topics since the last look
        (each change said once); the effective config when a flow was turned on or off,
        else None. A control topic that cannot be read now is looked at again next time."""
        logs = {id(log): log for log in [*self.logs.values(), *self.standby.values()]}
        found: dict[int, dict[str, FlowControl]] = {}
        for key, log in logs.items():
            try:
                found[key] = log.follow()
            except FerryError:
                continue
        with self._lock:
            before = set(self.flows)
            for name, state in self.states.items():
                kept = self._log(name)
                if kept is None or name not in found.get(id(kept), {}):
                    continue
                if kept.writes_pending(name):
                    continue  # this process recorded a newer change: the topic's order wins
                recorded = found[id(kept)][name]
                if recorded == state.control():
                    continue
                state.write_control(recorded)
                if name in self.flows:
                    state.directory.mkdir(parents=True, exist_ok=True)
                    state.replan_marker.touch()
                self._notice(f"flow {name}: {describe(recorded)}, as recorded in {kept.where}")
            effective = self.effective()
            after = {f.name for f in effective.enabled_flows}
            if after == before:
                return None
            self.flows = {f.name: f for f in effective.enabled_flows}
            return effective

    def _read_logs(self) -> dict[int, dict[str, FlowControl] | None]:
        """Each distinct control log's records (by the log's id); None where unreadable."""
        saved: dict[int, dict[str, FlowControl] | None] = {}
        logs = {id(log): log for log in [*self.logs.values(), *self.standby.values()]}
        running = {id(log) for log in self.logs.values()}
        for key, found in read_logs(logs.values()).items():
            if isinstance(found, FerryError):
                saved[key] = None
                if key not in running:
                    continue  # only flows the file disables: looked at again by follow()
                self._notice(
                    f"could not read the control topic {logs[key].where}: {found}; its flows "
                    "start with the API changes their state dir last recorded"
                )
            else:
                saved[key] = found
        return saved

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
        policy = flow.replication_policy
        why = policy.internal_rule(topic)
        if why is not None:
            raise RejectedChangeError(
                f"topic {topic} is internal ({why}), and internal topics are never replicated "
                "(MirrorMaker 2's rule)"
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
        added = new_errors(self.effective(), topics, controls, flow.name, changed)
        if added:
            raise RejectedChangeError(f"{added[0].message} (nothing was changed)")

    def remove_topic(self, source: str, target: str, topic: str) -> FlowControl:
        flow = self.flow(source, target)
        policy = flow.replication_policy
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
            if flow.target in self.config.read_only_clusters and new.enabled:
                # Its copies (and its control records) would be written to that cluster.
                raise RejectedChangeError(
                    f"flow {flow.name} copies into {flow.target}, a read-only source "
                    "(source.read.only = true) (nothing was changed)"
                )
            log = self._log(flow.name)
            if log is not None:
                log.write(flow.name, new)  # first: a change answered 200 survives a crash
            state.write_control(new)
            state.directory.mkdir(parents=True, exist_ok=True)
            state.replan_marker.touch()  # the running lease ends; the next one has the change
            self._notice(f"flow {flow.name}: {said} over the API")
            return new

    def close(self) -> None:
        every = [*self.logs.values(), *self.standby.values()]
        for log in {id(log): log for log in every}.values():
            log.close()


def describe(control: FlowControl) -> str:
    """One line for a person: what the override changes."""
    parts = []
    if control.enabled is not None:
        parts.append("runs" if control.enabled else "stopped")
    if control.paused:
        parts.append("paused")
    if control.added:
        parts.append("topics added: " + ", ".join(sorted(control.added)))
    if control.removed:
        parts.append("topics removed: " + ", ".join(sorted(control.removed)))
    return "; ".join(parts) or "as the config file says"
