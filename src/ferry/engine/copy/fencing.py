"""Fencing every transactional id a flow's earlier runs may still write with, before a run copies.

Exactly-once ids are per copy-task slot (engine/copy/transactional.py). Within a run, whoever
takes a slot starts its producers first, which fences the slot's earlier writers; partitions
move between slots only from one plan to the next, when the earlier plan's tasks have ended.
An earlier run is another matter: a `ferry run` killed, or paused (SIGSTOP, a frozen VM), may
have written a partition in a slot this run gives another partition, and a paused one wakes
and commits unless its id was fenced before this run reads the flow's positions. And a killed
run's open transaction (a lease's second parity, or a slot this run does not use) would hold
the target's last stable offset until the transaction timeout (60 s) aborts it: read_committed
consumers stall, and a `--once` run would say it is done while they do. So before a run
copies, a producer of every id of every slot any earlier plan used (both parities, the
head start's too) is started once (init_transactions fences the id's earlier producers and
aborts the transaction they left open) and closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy.transactional import PARITIES, TransactionalSettings
from ferry.engine.copy.types import CopyContext
from ferry.errors import RefusedError
from ferry.kafka import clients
from ferry.kafka.errors import Endpoint, ferry_error, kafka_error_of

__all__ = ["fence_tasks"]

# Producers started at once: each waits on round trips to the coordinator, not on a core.
# Measured on 2 loaded cores, 2,000 ids: 35 s with 16, 10 s with 64, 16 s with 128.
FENCE_THREADS = 64
INIT_TIMEOUT_SECONDS = 60.0


def fence_tasks(settings: TransactionalSettings, tasks: Iterable[str], ctx: CopyContext) -> int:
    """Start and close a producer of each transactional id of `tasks` (slots), both
    parities; returns how many ids were fenced. Raises the first failure once every attempt
    has ended (ferry's errors: an unreachable target is retried)."""
    target = Endpoint(ctx.target_alias, ctx.target_bootstrap)
    ids = [(task, parity) for task in tasks for parity in PARITIES]

    def fence(txn: tuple[str, int]) -> None:
        task, parity = txn
        producer = clients.producer(settings.for_task(task, parity))
        action = f"fence ferry's earlier transactional producers (task slot {task})"
        try:
            producer.init_transactions(INIT_TIMEOUT_SECONDS)
        except KafkaException as exc:
            error = kafka_error_of(exc)
            if (
                error is not None
                and error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            ):
                detail = f"could not {action}: {error.name()}: {error.str()}"
                raise RefusedError(
                    target.alias, target.bootstrap_servers, detail, _fix(ctx)
                ) from exc
            raise ferry_error(target, exc, action) from exc
        finally:
            with contextlib.suppress(KafkaException):  # nothing in flight: closes at once
                producer.close()

    with ThreadPoolExecutor(max(1, min(len(ids), FENCE_THREADS)), "ferry-fence") as pool:
        futures = [pool.submit(fence, txn) for txn in ids]
    for future in futures:
        future.result()
    return len(ids)


def _fix(ctx: CopyContext) -> str:
    return (
        f"grant ferry's principal WRITE and DESCRIBE on transactional ids "
        f"'ferry:{ctx.source_alias}->{ctx.target_alias}:' (prefixed) in {ctx.target_alias}"
    )
