"""`ferry run --once` for one flow after another, each retried when Spark fails to start it.

A run of several flows starts their planners side by side, so a later hop may not see what
an earlier hop copies in the same run, and on an overloaded machine a Python planner may not
start within Spark's 10 s (`Python worker failed to connect back`). One flow at a time, in
the order records travel, avoids both.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ferry.errors import FerryError
from ferry.local.cluster import LocalCluster
from tests.integration.replication_setup import run_once, write_config

# Spark's own failure to start a Python worker in time; a run that meets it committed what it
# copied and nothing else, so the next run goes on from there.
_SPARK_STARTUP = "Python worker failed to connect back"


def flow_configs(
    directory: Path, clusters: dict[str, LocalCluster], flows: Sequence[str], **settings: Any
) -> list[Path]:
    """A config per flow (`directory/<flow>/ferry.yaml`), all with one state dir."""
    paths = []
    for flow in flows:
        own = directory / flow.replace("->", "-to-")
        own.mkdir()
        state = {"ferry.state.dir": directory / "state"}
        paths.append(write_config(own, clusters, flows=(flow,), **{**settings, **state}))
    return paths


def run_in_order(configs: Sequence[Path], spark: Any, attempts: int = 6) -> None:
    for config in configs:
        for attempt in range(attempts):
            try:
                run_once(config, spark)
                break
            except FerryError as exc:
                if _SPARK_STARTUP not in str(exc) or attempt == attempts - 1:
                    raise
