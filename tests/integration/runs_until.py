"""`ferry run --once` repeated until a condition holds, for flows that feed one another."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ferry.errors import FerryError
from tests.integration.replication_setup import run_once

# Spark's own failure to start a Python worker in time on an overloaded machine; a run that
# meets it copied what it committed and nothing else, so the next run goes on from there.
_SPARK_STARTUP = "Python worker failed to connect back"


def run_until(config: Path, spark: Any, done: Callable[[], bool], runs: int = 4) -> None:
    """Runs once, again and again (at most `runs` times) until `done()`: flows of one run go
    side by side, so a later hop may not see what an earlier hop copies in the same run."""
    for _ in range(runs):
        try:
            run_once(config, spark)
        except FerryError as exc:
            if _SPARK_STARTUP not in str(exc):
                raise
        if done():
            return
