"""librdkafka settings of the replication clients: ferry's defaults, the user's, then the rules.

Defaults favour throughput and CPU on a copy path (big batches, a little linger, lz4 on the
wire, fetches no bigger than a range needs); every one can be overridden per cluster
(`B.producer.linger.ms = 0`, `B.producer.compression.type = none`). The forced settings are
what the copy loop relies on: end-of-partition events to know a range is done, no group
commits (progress lives in Spark's checkpoint), and the no-loss rules from the config model.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.config.model import ClusterConfig, FlowConfig

__all__ = [
    "CONSUMER_DEFAULTS",
    "PRODUCER_DEFAULTS",
    "consumer_settings",
    "flow_group",
    "producer_settings",
    "progress_consumer_settings",
    "transactional_settings",
]

CONSUMER_DEFAULTS = {
    "fetch.wait.max.ms": "25",  # a new assignment waits for the previous long poll
    "fetch.max.bytes": "52428800",
    # librdkafka's default. A range ends mid-fetch: what was fetched past its end is thrown
    # away when the task unassigns the partition, and fetched again by the next batch. At 8
    # MiB that was about a quarter of all fetched bytes at 8 partitions (bench.cpu_breakdown:
    # librdkafka's threads 8.7 -> 4.1 CPU s per 2,000,000 records with 1 MiB).
    "max.partition.fetch.bytes": "1048576",
    "queued.max.messages.kbytes": "131072",
    "socket.receive.buffer.bytes": "1048576",
}
PRODUCER_DEFAULTS = {
    # No linger: a copy is sent as soon as the producer's thread gets to it; with records
    # flowing, batches fill while the previous request is in flight anyway. Measured against
    # 10 ms (bench/results/linger-0.md, linger-10.md): p50 / p99 8 / 21 ms against 19 / 28 at
    # 5,000 records/s, CPU share 0.17 against 0.19, a 2,000,000-record backlog in 17.1 CPU s
    # against 20.7; exactly-once slices are acknowledged (and committed) a linger sooner.
    "linger.ms": "0",
    "batch.size": "1000000",
    "batch.num.messages": "10000",
    # Between datacenters the link is what costs: lz4 shrinks typical (JSON, text, Avro)
    # records 2-4x for about 0.6 us of CPU per 1 KiB record (measured on incompressible data,
    # where it only costs). `B.producer.compression.type = none` when records are already
    # compressed or the link is free (bench/results/no-compression.md: both copiers so).
    "compression.type": "lz4",
    "max.in.flight.requests.per.connection": "5",
    "queue.buffering.max.messages": "500000",
    "queue.buffering.max.kbytes": "524288",
    "message.max.bytes": "67108864",
    # librdkafka never times a copy out: a copy it gave up on leaves a gap that later copies
    # of the partition fill first, and its retry lands out of order. The copy loop gives a
    # silent target's batch up whole instead (engine/copy/ack_wait.py).
    "message.timeout.ms": "0",
    "socket.send.buffer.bytes": "1048576",
}


def consumer_settings(source: ClusterConfig, flow: FlowConfig) -> dict[str, str]:
    return {
        **CONSUMER_DEFAULTS,
        **source.consumer_config(),
        "group.id": flow_group(flow),  # never joined, never committed on the source
        "enable.partition.eof": "true",
        # Out of range means retention deleted records not yet copied: the copier hears of it
        # (and reports how many) instead of librdkafka jumping ahead silently.
        "auto.offset.reset": "error",
        "enable.auto.offset.store": "false",
    }


def producer_settings(target: ClusterConfig) -> dict[str, str]:
    return {**PRODUCER_DEFAULTS, **target.producer_config()}


def transactional_settings(
    settings: Mapping[str, str], transactional_id: str, transaction_timeout_ms: int
) -> dict[str, str]:
    """A transactional producer's `settings`: its id and transaction timeout, and a message
    timeout within the transaction's (librdkafka refuses one above it, and 0, never, would
    let a commit wait for ever where the transaction is aborted and retried instead)."""
    timeout = int(settings.get("message.timeout.ms", transaction_timeout_ms))
    if timeout <= 0 or timeout > transaction_timeout_ms:
        timeout = transaction_timeout_ms
    return {
        **settings,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": str(transaction_timeout_ms),
        "message.timeout.ms": str(timeout),
    }


def flow_group(flow: FlowConfig) -> str:
    return flow.progress_group


def progress_consumer_settings(target: ClusterConfig, flow: FlowConfig) -> dict[str, str]:
    """Exactly-once: reads the flow's progress, committed in the target with each transaction.

    Never subscribes; read_committed makes librdkafka ask for stable offsets (pending
    transactional offsets are waited for, never read half-done).
    """
    return {
        **target.consumer_config(),
        "group.id": flow_group(flow),
        "isolation.level": "read_committed",
        "enable.auto.commit": "false",
    }
