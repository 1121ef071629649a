"""The real CLI against clusters that do not answer (closed ports on 127.0.0.1).

Each command says which cluster, once, in ferry's words (no raw librdkafka lines), and every
one-shot command ends with a non-zero exit instead of waiting for the cluster forever.
"""

from __future__ import annotations

import socket
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
