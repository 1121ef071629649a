"""A replicator that stalls (a GC pause, a frozen VM) and wakes: past the transaction timeout,
and after a second `ferry run` of the same flow has taken over. The woken one is fenced by the
transactional ids the newer writer started: nothing it held open reaches a read_committed
reader, nothing is lost, nothing doubled (exactly-once)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.chaos.faults import FerryProcess
from tests.faults.harness import FaultCase, assert_exact, write_flow_config

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

# Longer than the 60 s transaction timeout of ferry's producers: the coordinator aborts what
# the frozen run held open before it wakes.
FROZEN_SECONDS = 70


def _freeze(process: FerryProcess, sig: signal.Signals) -> None:
    """Signal `ferry run`'s whole process group (driver, Spark JVM, Python workers), as a frozen
    machine stops all of them."""
    assert process.process is not None
    os.killpg(process.process.pid, sig)


def test_frozen_past_the_transaction_timeout(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    runs = [run.process for run in case.runs.values()]
    for process in runs:
        _freeze(process, signal.SIGSTOP)
    try:
        time.sleep(FROZEN_SECONDS)  # the fault: ferry frozen this long
    finally:
        for process in runs:
            _freeze(process, signal.SIGCONT)
    case.healed()
    case.await_copies(200)
    assert_exact(case.finish())


def test_frozen_while_a_second_run_takes_over(case: FaultCase, tmp_path) -> None:  # type: ignore[no-untyped-def]
    case.start_traffic()
    case.await_copies()
    frozen = [run.process for run in case.runs.values()]
    for process in frozen:
        _freeze(process, signal.SIGSTOP)
    successors = []
    try:
        for mode in case.runs:
            # The same flow from another machine: its own state directory, nothing shared
            # but the clusters.
            config = write_flow_config(tmp_path / mode, case.clusters, mode)
            successor = FerryProcess(config, tmp_path / mode)
            successor.start()
            successors.append(successor)
        case.await_copies(300)  # the successors copy
    finally:
        for process in frozen:
            _freeze(process, signal.SIGCONT)
    try:
        case.await_copies(200)  # the woken runs and the successors, side by side
        # A stop ends the current slice, whose producer the woken run may have just fenced:
        # its replacement's start, the head start's handover (60 s each at most) and Spark's
        # own stop come before the exit. Both successors are told at once and stop side by side.
        for successor in successors:
            successor.terminate()
        for successor in successors:
            successor.await_exit(240)
        # Fenced when they woke, and fencing back in turn as their tasks were retried: the
        # woken runs copy on (a fenced producer is retried, never a reason to stop the run).
        for mode, run in case.runs.items():
            assert run.process.alive(), (
                f"the woken {mode} run exited; its log ends:\n{run.process.log_tail()}"
            )
        case.healed()
        assert_exact(case.finish())
    finally:
        for successor in successors:
            if successor.alive():
                successor.sigkill()
