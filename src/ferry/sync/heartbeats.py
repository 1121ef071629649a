"""Heartbeats: a flow A->B writes `Heartbeat(A, B, now)` into A's `heartbeats` topic.

The flow then copies `heartbeats` like any other topic (the selector takes it whatever the
`topics` list says, as MM2 does), so B's `A.heartbeats` holds A's newest timestamp as of
the last batch: now minus that timestamp is the end-to-end latency `ferry status` reports,
and the prefixed names (`B.A.heartbeats`) are what `ferry.graph.hops.replication_hops` reads.
The topic is single-partition and compacted: the key is the (source, target) pair, so it
keeps one record per flow however long ferry runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import ReplicationError
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors, unavailable
from ferry.kafka.mm2_records import Heartbeat
from ferry.sync.checkpoints import SyncReport

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = ["HeartbeatEmitter", "ensure_heartbeats_topic"]


def ensure_heartbeats_topic(
    cluster: ClusterConfig, topic: str, replication_factor: int, *, timeout: float = 15.0
) -> None:
    """`topic` exists on `cluster`: one partition, compacted (MM2's heartbeats topic)."""
    admin = clients.admin_client(cluster.admin_config())
    with kafka_errors(cluster, "list topics"):
        if topic in admin.list_topics(timeout=timeout).topics:
            return
    new = NewTopic(
        topic,
        num_partitions=1,
        replication_factor=replication_factor,
        config={"cleanup.policy": "compact"},
    )
    fix = (
        "set heartbeats.topic.replication.factor to at most the number of brokers "
        f"in {cluster.alias}, or create the topic yourself"
    )
    # TOPIC_ALREADY_EXISTS: created meanwhile.
    done = {KafkaError.TOPIC_ALREADY_EXISTS}
    with kafka_errors(cluster, "create topic", topic=topic, fix=fix, done=done):
        admin.create_topics([new])[topic].result(timeout)


class HeartbeatEmitter:
    """One flow's heartbeats; `emit()` writes one and waits until the source acked it."""

    def __init__(
        self,
        config: FerryConfig,
        flow: FlowConfig,
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.flow = flow
        self.source = config.clusters[flow.source]
        self.topic = flow.replication_policy.heartbeats_topic()
        self._timeout = timeout
        self._clock = clock
        self._producer: Producer | None = None
        self._topic_ready = False
        self._refused: str | None = None  # why the source refused the topic, if it did

    def emit(self) -> SyncReport:
        if self._refused is not None:
            return SyncReport()  # said once; heartbeats are monitoring, never worth a stop
        if not self._topic_ready:
            try:
                ensure_heartbeats_topic(
                    self.source, self.topic, self.flow.heartbeats_topic_replication_factor
                )
            except ReplicationError as exc:
                self._refused = str(exc)
                return SyncReport(skipped=(f"heartbeats off: {exc}",))
            self._topic_ready = True
        if self._producer is None:
            self._producer = clients.producer(self.source.producer_config())
        beat = Heartbeat(self.flow.source, self.flow.target, int(self._clock() * 1000))
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        self._producer.produce(
            self.topic, key=beat.key_bytes(), value=beat.value_bytes(), on_delivery=on_delivery
        )
        if self._producer.flush(self._timeout) > 0:
            raise unavailable(
                self.source, TimeoutError(f"heartbeat to {self.topic} not acked in time")
            )
        if failures:
            raise unavailable(self.source, KafkaException(failures[0]))
        return SyncReport(0, 1)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(1.0)  # a beat lost on the way out misleads no one
            self._producer = None
