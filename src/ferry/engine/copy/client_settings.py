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
    "TRANSACTIONAL_PRODUCER_DEFAULTS",
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
    # One millisecond. librdkafka sends a produce request per partition, and its idempotent
    # producer keeps one in flight per partition: with no linger, at 20,000 records/s of 1 KiB
    # over 8 partitions, it sent 13,099 requests a second of 1.5 records each (the Java
    # producer 563 for the same records), and every short stall of the target left each
    # partition with records waiting behind its request. A millisecond makes the requests
    # fewer and larger (bench/results/linger-1-sweep.md against latest.md, the same day:
    # p99 16 against 32 ms at 20,000 records/s, 76 against 201 at 50,000, CPU share 0.20
    # against 0.26 and 0.26 against 0.49) for 1 ms of p50 at 1,000 records/s. Not 10: a
    # linger is waited at every rate (linger-0.md, linger-10.md: p50 8 against 19 ms at
    # 5,000 records/s). Exactly-once writers keep none (below).
    "linger.ms": "1",
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


# An exactly-once slice commits once its copies are acknowledged, so a linger delays every
# commit by its length; at a 25 ms commit interval 1 ms raised the p99 at a read_committed
# consumer in both sittings measured (bench/results/exactly-once-linger-1.md: 316 and 245
# against 259 and 170 ms).
TRANSACTIONAL_PRODUCER_DEFAULTS = {**PRODUCER_DEFAULTS, "linger.ms": "0"}


def producer_settings(target: ClusterConfig, *, transactional: bool = False) -> dict[str, str]:
    """The target's producer: ferry's defaults (a transactional writer's with `transactional`),
    then the user's `B.producer.*`."""
    defaults = TRANSACTIONAL_PRODUCER_DEFAULTS if transactional else PRODUCER_DEFAULTS
    return {**defaults, **target.producer_config()}


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
