"""Ending a local process by its pid (ferry.local.processes), on real processes (Python ones,
no broker): SIGTERM and a bounded wait, SIGKILL after it, a child reaped, a zombie of another
parent seen as ended at once, and an error naming the process when it outlives every step."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from ferry.errors import LocalClusterError
from ferry.local.processes import (
    end_process,
    kill_process,
    live_process,
    recorded_process,
    stop_process,
    stop_process_tree,
)

SLEEPER = "import time\nwhile True: time.sleep(1)"
STUBBORN = "import signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
STUBBORN += "print('ready', flush=True)\nwhile True: time.sleep(1)"
# A parent that starts a sleeper, says its pid, and never reaps it.
NEGLECTFUL = (
    "import subprocess, sys, time\n"
    f"child = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}])\n"
    "print(child.pid, flush=True)\n"
    "while True: time.sleep(1)"
)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; whatever is left of them is killed by pid after it."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def _start(started: list[subprocess.Popen[str]], code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    started.append(process)
    return process


def test_sigterm_ends_a_child_at_once_and_it_is_reaped(
    started: list[subprocess.Popen[str]],
) -> None:
    child = _start(started, SLEEPER)
    began = time.monotonic()
    stop_process(live_process(child.pid), "sleeper", 30.0)
    assert time.monotonic() - began < 10
    assert not psutil.pid_exists(child.pid)  # reaped: no zombie left behind


def test_sigkill_follows_when_sigterm_is_ignored_past_the_bound(
    started: list[subprocess.Popen[str]],
) -> None:
    child = _start(started, STUBBORN)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    began = time.monotonic()
    stop_process(live_process(child.pid), "stubborn", 1.0)
    took = time.monotonic() - began
    assert 1.0 <= took < 10, took
    assert not psutil.pid_exists(child.pid)


def test_kill_sends_sigkill_only(started: list[subprocess.Popen[str]]) -> None:
    child = _start(started, STUBBORN)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    kill_process(live_process(child.pid), "stubborn")
    assert not psutil.pid_exists(child.pid)


def test_a_zombie_of_another_parent_counts_as_ended_without_waiting_out_the_bound(
    started: list[subprocess.Popen[str]],
) -> None:
    parent = _start(started, NEGLECTFUL)
    assert parent.stdout is not None
    grandchild = int(parent.stdout.readline())
    began = time.monotonic()
    stop_process(live_process(grandchild), "grandchild", 30.0)
    assert time.monotonic() - began < 10  # not the 30 s bound: its parent will never reap it
    assert psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_no_process_is_nothing_to_do_and_one_that_outlives_every_step_is_named(
    started: list[subprocess.Popen[str]],
) -> None:
    stop_process(None, "nothing", 30.0)
    child = _start(started, SLEEPER)
    with pytest.raises(LocalClusterError) as refused:
        end_process(live_process(child.pid), "node 2 of cluster B", ((signal.SIGCONT, 0.3),))
    assert str(refused.value) == (
        f"node 2 of cluster B (pid {child.pid}) did not stop: still running 0.3 s after SIGCONT"
    )
    assert child.poll() is None


def test_a_process_tree_is_stopped_with_its_descendants(
    started: list[subprocess.Popen[str]],
) -> None:
    parent = _start(started, NEGLECTFUL)
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    root = psutil.Process(parent.pid)
    stop_process_tree(root, "a test's tree", timeout=10)
    assert not psutil.pid_exists(parent.pid) or root.status() == psutil.STATUS_ZOMBIE
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_a_process_is_recognised_the_moment_it_started(
    started: list[subprocess.Popen[str]],
) -> None:
    """Popen returns once the new program's close-on-exec descriptors are closed, before the
    kernel has its arguments: /proc/<pid>/cmdline read empty then, a live cluster in a state
    file was taken for gone, and a second one started beside it."""
    for n in range(30):
        marker = f"ready-{n}.json"
        process = subprocess.Popen(
            [sys.executable, "-c", SLEEPER, marker], stdout=subprocess.PIPE, text=True
        )
        started.append(process)
        assert recorded_process(process.pid, psutil.Process(process.pid).create_time(), marker)
        process.kill()


def test_a_command_line_read_empty_is_read_again_until_it_is_there(
    started: list[subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    process = _start(started, SLEEPER)
    real = psutil.Process.cmdline
    reads = []

    def cmdline(self: psutil.Process) -> list[str]:
        reads.append(self.pid)
        return [] if len(reads) <= 3 else real(self)

    monkeypatch.setattr(psutil.Process, "cmdline", cmdline)
    found = recorded_process(process.pid, psutil.Process(process.pid).create_time(), SLEEPER)
    assert found is not None and found.pid == process.pid and len(reads) == 4
    # Another program at the recorded pid (the marker is not in its arguments): not it.
    assert recorded_process(process.pid, found.create_time(), "ready.json") is None
