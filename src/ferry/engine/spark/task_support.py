"""What every task of the mirror sink needs, leased or bounded: which copy loop runs, its
clients dropped when a copy fails, exactly-once producers from the worker's cache, notices in
Spark's log, and the executor it ran on."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ferry.engine.copy.transactional import HEAD_START_TASK, ProducerFor, TransactionalSettings
from ferry.engine.copy.types import CopyContext, PartitionResult
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.errors import FerryError, error_to_text

__all__ = [
    "dropping_clients_on_failure",
    "print_notices",
    "task_executor",
    "task_slot",
    "transactional_producers",
    "use_native",
]


def dropping_clients_on_failure(
    copy: Callable[[], list[PartitionResult]], drop: Callable[[], None]
) -> list[PartitionResult]:
    """Run a copy; if it fails, drop its clients (a producer may be fenced, in a fatal state
    or hold purged copies) and turn ferry's errors into the one line Spark passes on."""
    try:
        return copy()
    except FerryError as exc:
        drop()
        raise RuntimeError(error_to_text(exc)) from None
    except BaseException:
        drop()
        raise


def use_native(choice: str) -> bool:
    """`ferry.copier`: native (C over librdkafka), python, or auto (native where it loads).

    Exactly-once always uses the Python loop (a transactional producer per task)."""
    if choice == "python":
        return False
    from ferry.engine.copy.native_loop import native_module, unavailable_reason

    if native_module() is not None:
        return True
    if choice == "native":
        raise RuntimeError(
            f"ferry.copier = native, but the native copier is not available here: "
            f"{unavailable_reason()}. Fix: reinstall ferry with a C compiler (make setup), "
            "or set ferry.copier = auto"
        )
    return False


def task_slot(head_start: bool) -> str:
    """This task's exactly-once slot: its bin's index in the plan (Spark's partition id), or
    the driver's head start's own (engine/copy/transactional.py)."""
    if head_start:
        return HEAD_START_TASK
    from pyspark import TaskContext

    context = TaskContext.get()
    return str(context.partitionId()) if context is not None else "0"


def transactional_producers(
    spec: FlowSpec, ctx: CopyContext, task: str
) -> tuple[TransactionalSettings, ProducerFor]:
    """Exactly-once: the settings of the flow's transactional producers, and
    `producer_for(fresh, parity)`, the task's started one from this worker's cache (`fresh`:
    a new one)."""
    from ferry.engine.copy import worker_clients

    settings = TransactionalSettings.of(spec.target, ctx)

    def producer_for(fresh: bool, parity: int = 0) -> Any:
        return worker_clients.transactional_producer(settings.for_task(task, parity), fresh)

    return settings, producer_for


def print_notices(spec: FlowSpec, notices: list[str]) -> None:
    """Notices of a task (a recreated topic, a position reset) on its stderr, in Spark's log."""
    import sys

    for notice in notices:
        print(f"ferry: flow {spec.flow.name}: {notice}", file=sys.stderr, flush=True)
        # For ferry run's console too, where the driver's state directory is here (a local
        # master); on a cluster it is the driver's, and Spark's log is all there is.
        with contextlib.suppress(OSError):
            FlowState(spec.state_dir).add_notice(f"flow {spec.flow.name}: {notice}")


def task_executor() -> dict[str, str]:
    """The executor this task runs on; the driver's own head start (engine/head_start.py),
    outside any task, copies on the driver."""
    from pyspark import TaskContext

    from ferry.engine.spark.executor_identity import executor_identity

    identity = executor_identity()
    return identity if TaskContext.get() is not None else {**identity, "id": "driver"}
