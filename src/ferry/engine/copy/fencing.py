"""Fencing every transactional id of a flow's partitions before a run copies in batches.

A batch (`exactly_once.copy_bin_exactly_once`) starts only the parity-0 producer of each
partition it has records for. A transaction a killed run left open under any other of the
flow's ids (a lease's parity-1 producer, a partition with no new records) would hold the
target's last stable offset until the transaction timeout (60 s) aborts it: nothing lost or
doubled, but read_committed consumers stall, and a `--once` run would say it is done while
they do. So before a run copies in batches, a producer of every id of every partition (both
parities) is started once (init_transactions fences the id's earlier producers and aborts the
transaction they left open) and closed. Leases need none of this: each starts both producers
of every partition it copies before anything else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy.transactional import PARITIES, TransactionalSettings
from ferry.engine.copy.types import CopyContext
from ferry.kafka import clients
from ferry.kafka.errors import Endpoint, kafka_errors

__all__ = ["fence_partitions"]

# Producers started at once: each waits on round trips to the coordinator, not on a core.
# Measured on 2 loaded cores, 2,000 ids: 35 s with 16, 10 s with 64, 16 s with 128.
FENCE_THREADS = 64
INIT_TIMEOUT_SECONDS = 60.0


def fence_partitions(
    settings: TransactionalSettings, partitions: Iterable[tuple[str, int]], ctx: CopyContext
) -> int:
    """Start and close a producer of each transactional id of `partitions` (source topic,
    partition), both parities; returns how many ids were fenced. Raises the first failure
    once every attempt has ended (ferry's errors: an unreachable target is retried)."""
    target = Endpoint(ctx.target_alias, ctx.target_bootstrap)
    ids = [(t, p, parity) for t, p in partitions for parity in PARITIES]

    def fence(txn: tuple[str, int, int]) -> None:
        topic, partition, parity = txn
        producer = clients.producer(settings.for_partition(topic, partition, parity))
        try:
            with kafka_errors(
                target,
                "fence ferry's earlier transactional producers",
                topic=topic,
                partition=partition,
                fix=lambda error: _fix(error, ctx),
            ):
                producer.init_transactions(INIT_TIMEOUT_SECONDS)
        finally:
            with contextlib.suppress(KafkaException):  # nothing in flight: closes at once
                producer.close()

    with ThreadPoolExecutor(max(1, min(len(ids), FENCE_THREADS)), "ferry-fence") as pool:
        futures = [pool.submit(fence, txn) for txn in ids]
    for future in futures:
        future.result()
    return len(ids)


def _fix(error: KafkaError, ctx: CopyContext) -> str:
    if error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return (
            f"grant ferry's principal WRITE and DESCRIBE on transactional ids "
            f"'ferry:{ctx.source_alias}->{ctx.target_alias}:' (prefixed) in {ctx.target_alias}"
        )
    return "see the broker's log for why it refused"
