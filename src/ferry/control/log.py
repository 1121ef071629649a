"""The control topic: every change made over the API, kept where a restart finds it.

Kafka Connect keeps connector configs in a compacted config topic on its own cluster; ferry
does the same with its flows' runtime overrides. One single-partition compacted topic
(`api.control.topic`, default `ferry-control.internal`): key the flow's name (`A->B`), value
its whole `FlowControl` (so compaction may keep only the last record of each flow, and the
last record is the flow's state).

Where it lives (`control_place`): on the cluster `api.control.cluster` when that is set, for
every flow; otherwise on each flow's target cluster, as MM2's dedicated mode keeps its
internal topics on each target, so flows into B keep their changes on B. `ferry run` reads it
to its end at start and writes a record (acks=all, flushed) before it acts on a change: a
change the API answered 200 for survives a crash and a restart, and a change that cannot be
written is refused. The default name ends in `.internal`, so no flow ever copies it.

A flow the file disables may be turned on by its record (`enabled`): the reverse of every
enabled flow has a place too (`switchable_flows`), so `ferry run` reads B->A's record beside
A->B's. The same topic keeps each switchover's steps (key `switchover:A->B`, see
control/switchover.py), which the flows' readers leave aside.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError
from ferry.flows.override import FlowControl
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.topic_reader import TopicTail

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = [
    "SWITCHOVER_KEY",
    "ControlLog",
    "RecordedControls",
    "control_logs",
    "control_place",
    "read_logs",
    "recorded_control",
    "recorded_controls",
    "switchable_flows",
]

SWITCHOVER_KEY = "switchover:"  # + the flow's name: that switchover's steps


class ControlLog:
    def __init__(self, cluster: ClusterConfig, topic: str, *, timeout: float = 15.0) -> None:
        self.cluster = cluster
        self.topic = topic
        self._timeout = timeout
        self._producer: Producer | None = None
        self._tail: TopicTail | None = None  # follow(): where the last look stopped
        # This process's records, per flow, in the order written, until follow() reads each
        # back: a record of its own read late must never undo a newer change it made since.
        self._pending: dict[str, list[bytes]] = {}

    @property
    def where(self) -> str:
        """`<topic> on <cluster alias>`, as messages name it."""
        return f"{self.topic} on {self.cluster.alias}"

    def read(self) -> dict[str, FlowControl]:
        """Every flow's last record; {} when the topic does not exist yet."""
        tail = TopicTail(self.cluster, self.topic, timeout=self._timeout)
        try:
            return self._parse(tail.read_new())
        finally:
            tail.close()

    def follow(self) -> dict[str, FlowControl]:
        """The flows whose last record among those written since the last call came from
        another process, with that record (a running `ferry run` looks every few seconds for
        changes made elsewhere). This process's own records are recognised as they come back,
        in the order it wrote them, and left out: its state has them already."""
        if self._tail is None:
            self._tail = TopicTail(self.cluster, self.topic, timeout=self._timeout)
        last: dict[str, FlowControl | None] = {}
        for key, value in self._tail.read_new():
            if key is None or key.decode("utf-8", "replace").startswith(SWITCHOVER_KEY):
                continue
            name = key.decode("utf-8", "replace")
            own = self._pending.get(name)
            if own and own[0] == value:
                own.pop(0)
                last[name] = None
            else:
                last.update(self._parse([(key, value)]))
        return {name: control for name, control in last.items() if control is not None}

    def writes_pending(self, flow: str) -> bool:
        """Whether this process wrote a record of `flow` that follow() has not read back yet
        (it then lies after everything follow() returned, so it is the flow's state)."""
        return bool(self._pending.get(flow))

    def _parse(self, records: list[tuple[bytes | None, bytes | None]]) -> dict[str, FlowControl]:
        state: dict[str, FlowControl] = {}
        for key, value in records:
            if key is None:
                continue
            name = key.decode("utf-8", "replace")
            if name.startswith(SWITCHOVER_KEY):
                continue
            try:
                state[name] = FlowControl.from_bytes(value)
            except ValueError as exc:
                raise ReplicationError(
                    f"the control record of flow {name} is not one ferry wrote: {exc}",
                    cluster=self.cluster.alias,
                    topic=self.topic,
                    fix="delete that record (produce a tombstone for its key) or the topic",
                ) from None
        return state

    def read_switchover(self, flow: str) -> bytes | None:
        """The last record of flow `flow`'s switchover; None when there is none."""
        wanted = (SWITCHOVER_KEY + flow).encode()
        tail = TopicTail(self.cluster, self.topic, timeout=self._timeout)
        try:
            found = [value for key, value in tail.read_new() if key == wanted]
        finally:
            tail.close()
        return found[-1] if found else None

    def write_switchover(self, flow: str, value: bytes) -> None:
        self._produce(SWITCHOVER_KEY + flow, value)

    def write(self, flow: str, control: FlowControl) -> None:
        """Record `control` as flow `flow`'s state, once the cluster acknowledged it; raises
        a `FerryError` naming the cluster and the topic otherwise."""
        value = control.to_bytes()
        pending = self._pending.setdefault(flow, [])
        pending.append(value)  # before it can be read back
        try:
            self._produce(flow, value)
        except BaseException:
            pending.pop()  # refused: a copy that reached the topic anyway reads as another's
            raise

    def _produce(self, key: str, value: bytes) -> None:
        self.ensure_topic()
        if self._producer is None:
            self._producer = clients.producer(self.cluster.producer_config())
        failures: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        with kafka_errors(self.cluster, f"record the change in the control topic {self.topic}"):
            self._producer.produce(self.topic, key=key.encode(), value=value, on_delivery=delivered)
            left = self._producer.flush(self._timeout)
        if left or failures:
            reason = failures[0].str() if failures else f"not acknowledged in {self._timeout}s"
            raise KafkaUnavailableError(
                self.cluster.alias,
                self.cluster.bootstrap_servers,
                reason,
                what=f"did not keep the change in the control topic {self.topic}",
            )

    def ensure_topic(self) -> None:
        """One partition, compacted, the broker's default replication factor."""
        admin = clients.admin_client(self.cluster.admin_config())
        with kafka_errors(self.cluster, f"read the metadata of the control topic {self.topic}"):
            if self.topic in admin.list_topics(timeout=self._timeout).topics:
                return
        new = NewTopic(self.topic, num_partitions=1, config={"cleanup.policy": "compact"})
        with kafka_errors(
            self.cluster,
            f"create the control topic {self.topic}",
            topic=self.topic,
            fix="create it yourself (one partition, cleanup.policy=compact)",
            done=(KafkaError.TOPIC_ALREADY_EXISTS,),
        ):
            admin.create_topics([new])[self.topic].result(self._timeout)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout)
            self._producer = None
        if self._tail is not None:
            self._tail.close()
            self._tail = None


def control_place(config: FerryConfig, flow: FlowConfig) -> tuple[str, str]:
    """(cluster alias, topic) where flow `flow`'s API changes are kept: `api.control.cluster`
    when set, else the flow's target cluster."""
    return config.api.control_cluster or flow.target, config.api.control_topic


def switchable_flows(config: FerryConfig) -> tuple[FlowConfig, ...]:
    """The flows whose control records `ferry run` reads: every enabled flow and the reverse
    of each (a switchover turns that on), in the config's order."""
    enabled = {flow.name for flow in config.enabled_flows}
    return tuple(
        flow
        for flow in config.flows
        if flow.name in enabled or f"{flow.target}->{flow.source}" in enabled
    )


def control_logs(
    config: FerryConfig, flows: Iterable[FlowConfig] | None = None, *, timeout: float = 15.0
) -> dict[str, ControlLog]:
    """Each flow's control log, by flow name (every enabled flow when `flows` is None).
    Flows whose changes are kept in the same place share one `ControlLog`."""
    shared: dict[tuple[str, str], ControlLog] = {}
    logs: dict[str, ControlLog] = {}
    for flow in config.enabled_flows if flows is None else flows:
        alias, topic = control_place(config, flow)
        if (alias, topic) not in shared:
            shared[alias, topic] = ControlLog(config.clusters[alias], topic, timeout=timeout)
        logs[flow.name] = shared[alias, topic]
    return logs


def recorded_control(config: FerryConfig, source: str, target: str) -> FlowControl | None:
    """Flow `source->target`'s override as its control topic records it (for commands beside
    `ferry run`: failover, translate); None when `source` or `target` is not a cluster of
    `config`. Raises a `FerryError` when the topic cannot be read."""
    if source not in config.clusters or target not in config.clusters or source == target:
        return None
    log = control_logs(config, [config.flow(source, target)], timeout=10)
    return log[f"{source}->{target}"].read().get(f"{source}->{target}", FlowControl())


@dataclass(frozen=True)
class RecordedControls:
    """What one control topic keeps for the flows whose changes live there (`ferry validate`
    and status print it); `error` when it could not be read."""

    cluster: str
    topic: str
    flows: tuple[str, ...]
    controls: dict[str, FlowControl] = field(default_factory=dict)
    error: FerryError | None = None

    @property
    def where(self) -> str:
        return f"{self.topic} on {self.cluster}"

    @property
    def changed(self) -> dict[str, FlowControl]:
        """The flows an API change left different from the config file."""
        return {name: c for name, c in self.controls.items() if not c.empty}


def recorded_controls(config: FerryConfig, *, timeout: float = 5.0) -> list[RecordedControls]:
    """Every control topic the enabled flows use, read, in cluster order."""
    logs = control_logs(config, timeout=timeout)
    places: dict[int, tuple[ControlLog, list[str]]] = {}
    for name, log in logs.items():
        places.setdefault(id(log), (log, []))[1].append(name)
    read = read_logs([log for log, _flows in places.values()])
    out = []
    for log, flows in places.values():
        saved = read[id(log)]
        if isinstance(saved, FerryError):
            out.append(RecordedControls(log.cluster.alias, log.topic, tuple(flows), error=saved))
            continue
        kept = {name: c for name, c in saved.items() if name in flows}
        out.append(RecordedControls(log.cluster.alias, log.topic, tuple(flows), kept))
    order = list(config.clusters)
    return sorted(out, key=lambda r: order.index(r.cluster))


def read_logs(logs: Iterable[ControlLog]) -> dict[int, dict[str, FlowControl] | FerryError]:
    """Each distinct log's records by the log's id, or the error that kept it from being read.
    Read side by side: a cluster that does not answer costs one timeout, not one per cluster."""
    distinct = list({id(log): log for log in logs}.values())

    def read(log: ControlLog) -> dict[str, FlowControl] | FerryError:
        try:
            return log.read()
        except FerryError as exc:
            return exc

    if not distinct:
        return {}
    with ThreadPoolExecutor(len(distinct), thread_name_prefix="ferry-control-read") as pool:
        return dict(zip(map(id, distinct), pool.map(read, distinct), strict=True))
