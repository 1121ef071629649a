"""The real CLI against clusters that do not answer (closed ports on 127.0.0.1).

Each command says which cluster, once, in ferry's words (no raw librdkafka lines), and every
one-shot command ends with a non-zero exit instead of waiting for the cluster forever. A run
waiting for one prints its threads' stacks on SIGUSR1 and keeps waiting.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ferry_cli import run_ferry


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the socket goes


@pytest.fixture
def unreachable(tmp_path: Path) -> Path:
    a, b = _closed_port(), _closed_port()
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = A, B\nA.bootstrap.servers = 127.0.0.1:{a}\n"
        f"B.bootstrap.servers = 127.0.0.1:{b}\nA->B.enabled = true\n"
        f"ferry.state.dir = {tmp_path / 'state'}\nferry.once.max.wait.seconds = 4\n"
    )
    return config


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"within {timeout}s: {what}"
        time.sleep(0.1)


def _no_raw_client_lines(text: str) -> None:
    assert "%3|" not in text and "|FAIL|" not in text, text[:2000]


def test_run_once_gives_up_after_its_bounded_wait_and_names_the_cluster(unreachable: Path) -> None:
    result = run_ferry("run", "-c", str(unreachable), "--once", timeout=120)
    assert result.returncode == 1, result.stderr
    _no_raw_client_lines(result.stdout + result.stderr)
    bootstrap = next(
        line.split(" = ")[1] for line in unreachable.read_text().splitlines() if "A.boot" in line
    )
    assert f"cluster A ({bootstrap}) is unreachable" in result.stderr
    assert "gave up after" in result.stderr and "ferry.once.max.wait.seconds" in result.stderr
    # Said once (when it stopped answering, or in the final error), however often retried.
    assert result.stderr.count("cluster A (") == 1, result.stderr


def test_monitor_once_reports_each_flow_once_without_raw_client_lines(unreachable: Path) -> None:
    result = run_ferry("monitor", "-c", str(unreachable), "--once", timeout=120)
    assert result.returncode == 1, result.stderr
    _no_raw_client_lines(result.stdout + result.stderr)
    assert result.stderr.count("cluster A (127.0.0.1:") == 1, result.stderr


def test_a_waiting_run_prints_its_threads_on_sigusr1_and_goes_on(
    unreachable: Path, tmp_path: Path
) -> None:
    # The entry point itself, as its own process: `ferry run` (not --once) waits for cluster A.
    log = tmp_path / "ferry.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ferry", "run", "-c", str(unreachable)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "flow A->B" in log.read_text(), 60, "ferry starting the flow")
        proc.send_signal(signal.SIGUSR1)
        # The dump is written thread by thread while we read: wait for a frame of ferry's own.
        wait_for(
            lambda: (
                "most recent call first" in log.read_text()
                and re.search(r'File "[^"]*/ferry/[^"]*\.py"', log.read_text()) is not None
            ),
            20,
            "the threads' stacks, ferry's frames among them",
        )
        assert proc.poll() is None, "SIGUSR1 must not end the run"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
