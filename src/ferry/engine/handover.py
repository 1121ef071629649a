"""The handover from the driver's head start (engine/head_start.py) to Spark's first task.

A starting task of the mirror sink asks the head start to stop (`FlowState.handover_marker`)
and waits until it has committed its last slice and stopped (its `head_start_marker` gone),
then resumes from the position on the target, as any lease does: nothing is copied twice and
nothing skipped. This side needs only the flow's state directory, so the sink imports it
without importing the head start (which itself copies with the sink).
"""

from __future__ import annotations

import contextlib
import time

import psutil

from ferry.engine.flow_state import FlowState

__all__ = ["HANDOVER_TIMEOUT_SECONDS", "take_over"]

# How long a starting task waits for the head start to stop. It stops within a slice
# (ferry.commit.interval.ms) plus the wait for its last acknowledgements; past this the task
# goes on anyway (at-least-once, the head start's last slice may then be copied twice).
HANDOVER_TIMEOUT_SECONDS = 60.0


def take_over(
    state: FlowState, timeout: float = HANDOVER_TIMEOUT_SECONDS, poll_seconds: float = 0.02
) -> bool:
    """A task of the sink starting: stop the driver's head start, if one runs, and wait.
    True if it was still running when the wait ended (then exactly-once fences its ids)."""
    owner = _owner(state)
    if owner is None:
        return False
    with contextlib.suppress(OSError):
        state.handover_marker.touch()
    deadline = time.monotonic() + timeout
    while state.head_start_marker.exists() and psutil.pid_exists(owner):
        if time.monotonic() >= deadline:
            return True
        time.sleep(poll_seconds)
    return False


def _owner(state: FlowState) -> int | None:
    try:
        return int(state.head_start_marker.read_text().strip())
    except (OSError, ValueError):
        return None
