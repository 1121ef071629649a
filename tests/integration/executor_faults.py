"""Steady traffic copied by `ferry run` on a Spark cluster while executors are lost: the
producer, the watch on the target, the waits with deadlines, the audit at the end, and what
Spark's event log says it did with the lost tasks. Shared by the standalone cluster's
executor-loss tests and the YARN one."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

from tests.chaos.audit import Audit, audit, rewinds
from tests.chaos.faults import FerryProcess
from tests.chaos.observer import LagMonitor, read_copies, read_source
from tests.chaos.traffic import SteadyProducer
from tests.integration.spark_workers import spark_events

PARTITIONS = 4
RATE = 200  # records a second into A, round-robin over the partitions
PROGRESS = 600  # copies that must arrive after each fault before the next one
DEADLINE = 300.0  # seconds for any of those steps, on a busy 2-core machine


def wait_or_fail(condition: Callable[[], bool], ferry: FerryProcess, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if not ferry.alive():
            ferry._running()  # raises with the end of its log
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.2)


def progress(monitor: LagMonitor, ferry: FerryProcess, what: str) -> None:
    """PROGRESS more copies, and on every partition: a backlog the surviving executor catches
    up on would bring the copies alone, before the lost executor's partitions move again."""
    target = monitor.seen + PROGRESS
    each = {p: monitor.next_origin.get(p, 0) + PROGRESS // PARTITIONS for p in range(PARTITIONS)}
    wait_or_fail(lambda: monitor.seen >= target and monitor.reached(each), ferry, what)


def sigkill_tree(process: psutil.Process) -> None:
    """SIGKILL a process and everything under it (an executor's Python workers, a worker's
    executor), children first so none is re-parented and missed."""
    family = [*process.children(recursive=True), process]
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(signal.SIGKILL)
    psutil.wait_procs(family, timeout=30)


def finish(
    traffic: SteadyProducer, monitor: LagMonitor, ferry: FerryProcess, a: str, b: str, topic: str
) -> Audit:
    """Stop the traffic, wait until the target holds every source record, stop ferry; audit."""
    traffic.stop()
    source = read_source(a, topic, PARTITIONS)
    ends = {p: records[-1][0] + 1 if records else 0 for p, records in source.items()}
    wait_or_fail(lambda: monitor.reached(ends), ferry, "the catch-up")
    assert ferry.sigterm() == 0
    copies = read_copies(b, f"A.{topic}", PARTITIONS)
    result = audit(source, copies)
    print({n: result.total(n) for n in ("source", "copies", "lost", "duplicated", "reordered")})
    for rewind in rewinds(copies):  # where duplicates come from, should a bound fail
        print(rewind)
    return result


def _executor(event: dict[str, Any]) -> str:
    return str(event["Task Info"]["Executor ID"])


def lost_and_retried(events: Path, executor: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The tasks Spark lost with `executor`, and the later attempts of those tasks (stage,
    index, attempt, executor) it started elsewhere."""
    lost = [
        e
        for e in spark_events(events, "SparkListenerTaskEnd")
        if e["Task End Reason"]["Reason"] == "ExecutorLostFailure"
        and e["Task Info"]["Executor ID"] == executor
    ]
    retried = [
        (
            s["Stage ID"],
            s["Task Info"]["Index"],
            s["Task Info"]["Attempt"],
            s["Task Info"]["Executor ID"],
        )
        for s in spark_events(events, "SparkListenerTaskStart")
        for e in lost
        if s["Stage ID"] == e["Stage ID"]
        and s["Task Info"]["Index"] == e["Task Info"]["Index"]
        and s["Task Info"]["Attempt"] > e["Task Info"]["Attempt"]
    ]
    return lost, retried


@contextlib.contextmanager
def copying(
    tmp_path: Path, config: Path, a: str, b: str, topic: str
) -> Iterator[tuple[SteadyProducer, LagMonitor, FerryProcess]]:
    """Traffic into A, a watch on B, and `ferry run` started; all stopped on the way out."""
    traffic = SteadyProducer(a, topic, PARTITIONS, RATE).start()
    monitor = LagMonitor(b, f"A.{topic}", PARTITIONS).start()
    ferry = FerryProcess(config, tmp_path)
    try:
        ferry.start()
        progress(monitor, ferry, "the first copies")
        yield traffic, monitor, ferry
    finally:
        traffic.stop()
        monitor.stop()
        if ferry.alive():
            ferry.sigkill()


def assert_ran_again(events: Path, killed: str) -> None:
    """Spark lost a task with executor `killed` and started it again on another executor."""
    lost, retried = lost_and_retried(events, killed)
    print(f"lost with executor {killed}: {len(lost)} task(s); started again: {retried}")
    assert lost, f"Spark's event log has no task lost with executor {killed}"
    assert retried and all(r[3] != killed for r in retried), retried
