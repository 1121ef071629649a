"""The transactional producers of exactly-once copying: who they are and how they are set.

A copy task (one bin of a lease or of a batch) writes all its partitions in one transaction
at a time, with a producer whose `transactional.id` names the flow and the task's slot: the
bin's index in the plan (`task_transactional_id`). Whoever copies in that slot next starts a
producer with that id, which fences the slot's earlier writers (an attempt Spark retried, a
lease's task of before) and aborts the transaction they left open. Partitions move between
slots only from one plan to the next, when the earlier plan's tasks have all ended; a run's
start fences every slot an earlier run may have used (engine/copy/fencing.py), so no writer
of an earlier run is left unfenced when a partition lands in another slot.

A lease uses two producers per slot, of two parities, so that one slice's transaction commits
while the next slice copies (engine/copy/commit_pipeline.py); a batch uses the first. The
driver's head start copies in a slot of its own (HEAD_START_TASK). Pure: no clients here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ferry.config.model import ClusterConfig
from ferry.engine.copy.client_settings import producer_settings, transactional_settings
from ferry.engine.copy.types import CopyContext

__all__ = [
    "HEAD_START_TASK",
    "PARITIES",
    "TRANSACTION_TIMEOUT_MS",
    "ProducerFor",
    "TransactionalSettings",
    "resume_at",
    "task_transactional_id",
]

# Long enough to copy a batch; short enough that a transaction left open by a crashed ferry
# that is not restarted does not hold back the target's read_committed consumers for long.
TRANSACTION_TIMEOUT_MS = 60_000
# A lease's two producers per task (see commit_pipeline); a batch uses the first.
PARITIES = (0, 1)
# The slot of the driver's head start (engine/head_start.py), which copies before any task.
HEAD_START_TASK = "head-start"


class ProducerFor(Protocol):
    """The started transactional producer of the task, of one of its two ids (`parity`);
    `fresh`: a new one, which fences the cached one."""

    def __call__(self, fresh: bool, parity: int = 0) -> Any: ...


def task_transactional_id(source_alias: str, target_alias: str, task: str, parity: int = 0) -> str:
    """Stable per flow, task slot (a bin's index, or HEAD_START_TASK) and parity.

    '/' cannot occur in a topic name, so no id of a slot is an id an older ferry gave a
    partition (`<topic>:<partition>`); all share the prefix `ferry:<source>-><target>:` that
    ferry's principal is granted."""
    base = f"ferry:{source_alias}->{target_alias}:task/{task}"
    return base if parity == 0 else f"{base}/{parity}"


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
    """librdkafka settings of the transactional producers of a flow's copy tasks."""

    def __init__(self, producer_settings: Mapping[str, str], ctx: CopyContext) -> None:
        self._base = dict(producer_settings)
        self._ctx = ctx

    @classmethod
    def of(cls, target: ClusterConfig, ctx: CopyContext) -> TransactionalSettings:
        """For writers into `target`: ferry's transactional defaults, then the user's."""
        return cls(producer_settings(target, transactional=True), ctx)

    def for_task(self, task: str, parity: int = 0) -> dict[str, str]:
        ctx = self._ctx
        txn = task_transactional_id(ctx.source_alias, ctx.target_alias, task, parity)
        return transactional_settings(self._base, txn, TRANSACTION_TIMEOUT_MS)

    def for_task_parities(self, task: str) -> list[dict[str, str]]:
        """Every producer's settings a task may use (both parities)."""
        return [self.for_task(task, parity) for parity in PARITIES]
