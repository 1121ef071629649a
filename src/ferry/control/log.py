"""The control topic: every change made over the API, kept where a restart finds it.

Kafka Connect keeps connector configs in a compacted config topic; ferry does the same with
its flows' runtime overrides. One single-partition compacted topic (`api.control.topic`,
default `ferry-control.internal`) on the cluster `api.control.cluster`: key the flow's name
(`A->B`), value its whole `FlowControl` (so compaction may keep only the last record of each
flow, and the last record is the flow's state). `ferry run` reads it to its end at start and
writes a record (acks=all, flushed) before it acts on a change: a change the API answered 200
for survives a crash.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ferry.config.model import ClusterConfig, FerryConfig
from ferry.errors import ReplicationError
from ferry.flows.control import FlowControl
from ferry.kafka import clients
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable
from ferry.kafka.topic_reader import TopicTail

__all__ = ["ControlLog", "recorded_control"]


class ControlLog:
    def __init__(self, cluster: ClusterConfig, topic: str, *, timeout: float = 15.0) -> None:
        self.cluster = cluster
        self.topic = topic
        self._timeout = timeout
        self._producer: Any = None

    def read(self) -> dict[str, FlowControl]:
        """Every flow's last record; {} when the topic does not exist yet."""
        tail = TopicTail(self.cluster, self.topic, timeout=self._timeout)
        try:
            records = tail.read_new()
        finally:
            tail.close()
        state: dict[str, FlowControl] = {}
        for key, value in records:
            if key is None:
                continue
            name = key.decode("utf-8", "replace")
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

    def write(self, flow: str, control: FlowControl) -> None:
        """Record `control` as flow `flow`'s state, once the cluster acknowledged it."""
        self.ensure_topic()
        if self._producer is None:
            self._producer = clients.producer(self.cluster.producer_config())
        failures: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        self._producer.produce(
            self.topic, key=flow.encode(), value=control.to_bytes(), on_delivery=delivered
        )
        left = self._producer.flush(self._timeout)
        if left or failures:
            reason = failures[0].str() if failures else f"not acknowledged in {self._timeout}s"
            raise unavailable(self.cluster, RuntimeError(f"control record not written: {reason}"))

    def ensure_topic(self) -> None:
        """One partition, compacted, the broker's default replication factor."""
        admin = clients.admin_client(self.cluster.admin_config())
        try:
            if self.topic in admin.list_topics(timeout=self._timeout).topics:
                return
        except KafkaException as exc:
            raise unavailable(self.cluster, exc) from None
        new = NewTopic(self.topic, num_partitions=1, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([new])[self.topic].result(self._timeout)
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if error is None or error.code() in UNREACHABLE_CODES:
                raise unavailable(self.cluster, exc) from None
            raise ReplicationError(
                f"could not create the control topic: {error.name()}: {error.str()}.",
                cluster=self.cluster.alias,
                topic=self.topic,
                fix="create it yourself (one partition, cleanup.policy=compact)",
            ) from None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout)
            self._producer = None


def recorded_control(config: FerryConfig, source: str, target: str) -> FlowControl | None:
    """Flow `source->target`'s override as the control topic records it; None without
    `api.control.cluster`. For commands beside `ferry run` (failover, translate)."""
    api = config.api
    if api.control_cluster is None:
        return None
    log = ControlLog(config.clusters[api.control_cluster], api.control_topic, timeout=10)
    return log.read().get(f"{source}->{target}", FlowControl())
