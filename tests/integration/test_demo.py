"""`ferry demo` (what `make demo` runs) works end to end and cleans up after itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.ferry_cli import run_ferry

pytestmark = pytest.mark.integration


def test_demo_round_trips_a_record_on_each_cluster_and_stops_them(tmp_path: Path) -> None:
    result = run_ferry("demo", "--dir", str(tmp_path), timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    for alias in ("A", "B"):
        assert f"hello from {alias}" in result.stdout
    assert "via=demo" in result.stdout
    assert "Clusters stopped; no process or port left behind." in result.stdout
    pids = [int(pid) for pid in re.findall(r"\(pid (\d+),", result.stdout)]
    assert len(pids) == 2, result.stdout
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or str(tmp_path) not in cmdline.read_text(), pid
