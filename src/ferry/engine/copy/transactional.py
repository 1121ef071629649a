"""The transactional producers of exactly-once copying: who they are and how they are set.

Each source partition has producers whose `transactional.id` names the flow, topic, partition
and parity: whoever copies the partition next starts producers with those ids, which fences
every earlier writer (a task Spark retried, a worker of a killed `ferry run`). A lease uses two
per partition, of two parities, so that one slice's transaction commits while the next slice
copies (engine/copy/commit_pipeline.py); a batch uses the first. Pure: no clients here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ferry.engine.copy.types import CopyContext, CopyRange

__all__ = [
    "PARITIES",
    "TRANSACTION_TIMEOUT_MS",
    "ProducerFor",
    "TransactionalSettings",
    "resume_at",
    "transactional_id",
]

# Long enough to copy a batch; short enough that a transaction left open by a crashed ferry
# that is not restarted does not hold back the target's read_committed consumers for long.
TRANSACTION_TIMEOUT_MS = 60_000
# A lease's two producers per partition (see commit_pipeline); a batch uses the first.
PARITIES = (0, 1)


class ProducerFor(Protocol):
    """The started transactional producer of a source partition (`fresh`: a new one, which
    fences the cached one), of one of the partition's two ids (`parity`)."""

    def __call__(self, topic: str, partition: int, fresh: bool, parity: int = 0) -> Any: ...


def transactional_id(
    source_alias: str, target_alias: str, topic: str, partition: int, parity: int = 0
) -> str:
    """Stable per flow, source partition and parity: whoever copies the partition next
    starts producers with both of its ids, which fences every earlier writer."""
    # ':' cannot occur in a topic name, so no two partitions or parities share an id; parity 0
    # keeps the id a single producer per partition had, so its writers are fenced too.
    base = f"ferry:{source_alias}->{target_alias}:{topic}:{partition}"
    return base if parity == 0 else f"{base}:{parity}"


def resume_at(planned_start: int, committed: int | None) -> int:
    """Where a range starts: Spark's plan, or the committed progress when that is ahead.

    Spark commits a batch only after every transaction of it committed, so the plan is never
    ahead of what the target holds; the committed progress is ahead when a batch is replayed
    after a crash (or when Spark's checkpoint was lost: nothing is copied twice even then).
    A progress behind the plan (offsets expired, or an at-least-once run in between) is
    ignored: copying from it would write records the target already holds.
    """
    if committed is None or committed < 0:
        return planned_start
    return max(planned_start, committed)


class TransactionalSettings:
    """librdkafka settings of the transactional producer of one source partition."""

    def __init__(self, producer_settings: Mapping[str, str], ctx: CopyContext) -> None:
        self._base = {
            **producer_settings,
            "transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
        }
        # librdkafka refuses a message timeout above the transaction timeout.
        timeout = int(self._base.get("message.timeout.ms", TRANSACTION_TIMEOUT_MS))
        self._base["message.timeout.ms"] = str(min(timeout, TRANSACTION_TIMEOUT_MS))
        self._ctx = ctx

    def for_partition(self, topic: str, partition: int, parity: int = 0) -> dict[str, str]:
        ctx = self._ctx
        txn = transactional_id(ctx.source_alias, ctx.target_alias, topic, partition, parity)
        return {**self._base, "transactional.id": txn}

    def for_ranges(self, ranges: list[CopyRange]) -> list[dict[str, str]]:
        """Every producer's settings a lease of `ranges` may use."""
        return [self.for_partition(r.topic, r.partition, p) for r in ranges for p in PARITIES]
