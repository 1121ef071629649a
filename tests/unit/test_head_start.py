"""The handover from the driver's head start to the first leased task, through the state dir."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ferry.engine.flow_state import FlowState
from ferry.engine.handover import take_over


def test_without_a_head_start_a_task_starts_at_once(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    assert not take_over(state, timeout=30)
    assert not state.handover_marker.exists(), "nobody to ask"


def test_a_task_asks_the_head_start_to_stop_and_waits_until_it_has(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    state.head_start_marker.write_text(str(os.getpid()))
    stopped_at: list[float] = []

    def head_start() -> None:  # stops once asked, as HeadStart does after its last commit
        deadline = time.monotonic() + 30
        while not state.handover_marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        stopped_at.append(time.monotonic())
        state.head_start_marker.unlink()

    driver = threading.Thread(target=head_start)
    driver.start()
    assert not take_over(state, timeout=30), "stopped: nothing to fence"
    resumed_at = time.monotonic()
    driver.join()
    assert stopped_at and stopped_at[0] <= resumed_at, "the task resumed after the head start"
    assert not state.head_start_marker.exists()


def test_a_head_start_whose_driver_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    state = FlowState(tmp_path)
    state.head_start_marker.write_text(gone.stdout.strip())
    began = time.monotonic()
    assert not take_over(state, timeout=30)
    assert time.monotonic() - began < 30, "a dead driver's marker does not hold a task back"


def test_a_head_start_that_does_not_stop_holds_a_task_only_until_the_timeout(
    tmp_path: Path,
) -> None:
    state = FlowState(tmp_path)
    state.head_start_marker.write_text(str(os.getpid()))
    assert take_over(state, timeout=0.2), "said still running: exactly-once fences its ids"
    assert state.handover_marker.exists(), "it was asked"
    assert state.head_start_marker.exists(), "and never stopped; the task went on anyway"
