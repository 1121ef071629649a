"""Run the `ferry` command line the way a user does: a separate process, wide output."""

from __future__ import annotations

import os
import subprocess
import sys


def run_ferry(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )
