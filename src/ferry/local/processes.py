"""Ending a local process by its pid (a broker node, a schema registry, a link proxy): a signal,
then a bounded wait on psutil, then the next signal; an error naming the process when it
outlives them all.

psutil's `Process.wait` reaps a process that is this one's child (as `ferry local up` in the
same process, a test's session clusters) and, on Linux, waits on a pidfd rather than polling.
What it cannot tell is that a process it is not the parent of has ended but not been reaped:
a zombie whose parent is alive and does not wait for it (an orphan under a container's first
process that never reaps). Such a process runs nothing and only its parent can remove it, so
it counts as ended here; without that check, stopping it would wait out every bound and then
fail.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Sequence

import psutil

from ferry.errors import LocalClusterError

__all__ = [
    "KILL_WAIT_SECONDS",
    "command_line",
    "end_process",
    "kill_process",
    "live_process",
    "recorded_process",
    "running_command_line",
    "stop_process",
    "stop_process_tree",
]

KILL_WAIT_SECONDS = 10.0  # after SIGKILL: the kernel tears a JVM's memory down in well under it
_SLICE_SECONDS = 0.5  # how soon a zombie that is not this process's child is seen as ended
_ARGUMENTS_WAIT_SECONDS = 1.0  # a program just started has its arguments in far less


def live_process(pid: int) -> psutil.Process | None:
    """The process `pid` as psutil sees it now (its start time kept, so a signal never reaches
    a later process given the same pid), or None when there is none."""
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def stop_process(
    process: psutil.Process | None,
    what: str,
    timeout: float,
    *,
    kill_wait: float = KILL_WAIT_SECONDS,
) -> None:
    """SIGTERM (a clean shutdown), SIGKILL if it has not ended within `timeout`."""
    end_process(process, what, ((signal.SIGTERM, timeout), (signal.SIGKILL, kill_wait)))


def recorded_process(pid: int, started: float, marker: str) -> psutil.Process | None:
    """The process a state file recorded (pid, psutil's create_time, a string in its command
    line), if it is still that one: a recycled pid has another start time or command line."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started) > 1 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc if any(marker in arg for arg in command_line(proc)) else None
    except psutil.Error:
        return None


def running_command_line(pid: int) -> list[str] | None:
    """The command line of process `pid`, or None when it is gone or has exited and only
    waits for its parent to reap it (a zombie)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return command_line(proc)
    except psutil.Error:
        return None


def command_line(proc: psutil.Process) -> list[str]:
    """`proc`'s command line, once the kernel has it. Linux closes a new program's
    close-on-exec descriptors (which is when `subprocess.Popen` returns) before it sets up the
    program's arguments: for that moment, a fraction of a millisecond on a quiet machine and
    longer on a busy one, /proc/<pid>/cmdline reads empty. A process whose command line stays
    empty (a kernel thread) is given up on after `_ARGUMENTS_WAIT_SECONDS`."""
    deadline = time.monotonic() + _ARGUMENTS_WAIT_SECONDS
    while not (line := proc.cmdline()) and time.monotonic() < deadline:
        time.sleep(0.005)
    return line


def stop_process_tree(
    process: psutil.Process, what: str, timeout: float, *, kill_wait: float = KILL_WAIT_SECONDS
) -> None:
    """SIGTERM `process` and every descendant (a Spark worker's executors and their Python, a
    NodeManager's containers), SIGKILL what is left after `timeout`. Raises LocalClusterError
    naming `what` when some outlive that too."""
    family = [process, *process.children(recursive=True)]
    for member in family:
        with contextlib.suppress(psutil.Error):
            member.send_signal(signal.SIGTERM)
    _, left = psutil.wait_procs(family, timeout=timeout)
    for member in left:
        with contextlib.suppress(psutil.Error):
            member.kill()
    _, left = psutil.wait_procs(left, timeout=kill_wait)
    if left:
        raise LocalClusterError(f"{what} (pid {process.pid}) did not stop")


def kill_process(
    process: psutil.Process | None, what: str, *, kill_wait: float = KILL_WAIT_SECONDS
) -> None:
    """SIGKILL, as a crash would."""
    end_process(process, what, ((signal.SIGKILL, kill_wait),))


def end_process(
    process: psutil.Process | None,
    what: str,
    steps: Sequence[tuple[signal.Signals, float]],
) -> None:
    """Send each step's signal in turn and wait up to its bound for `process` to end; return
    as soon as it has. None (the process is not running) returns at once. Raises
    LocalClusterError naming `what` and the pid when it outlived every step."""
    if process is None:
        return
    for sig, bound in steps:
        try:
            process.send_signal(sig)
        except psutil.NoSuchProcess:
            return
        if _ended_within(process, bound):
            return
    waited = sum(bound for _, bound in steps)
    sent = ", then ".join(sig.name for sig, _ in steps)
    raise LocalClusterError(
        f"{what} (pid {process.pid}) did not stop: still running {waited:g} s after {sent}"
    )


def _ended_within(process: psutil.Process, timeout: float) -> bool:
    """Whether `process` ended (reaped if it is this process's child, gone, or a zombie of
    another parent) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            process.wait(max(0.0, min(left, _SLICE_SECONDS)))
            return True
        except psutil.NoSuchProcess:
            return True
        except psutil.TimeoutExpired:
            if _zombie(process):
                return True
            if left <= _SLICE_SECONDS:
                return False


def _zombie(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
