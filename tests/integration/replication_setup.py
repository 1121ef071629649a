"""Configs and runs of the replication engine against the session clusters."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ferry.config import FerryConfig, load_config
from ferry.engine.runner import FlowProgress, Runner
from ferry.kafka.provenance import ORIGIN_HEADER
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec


def write_config(
    directory: Path,
    clusters: dict[str, LocalCluster],
    *,
    flows: tuple[str, ...] = ("A->B",),
    topics: str,
    **settings: Any,
) -> Path:
    """A ferry.yaml for single-broker clusters: every replication factor 1, flat keys."""
    lines = ["clusters:"]
    lines += [f"  {alias}: {{bootstrap.servers: '{b.bootstrap}'}}" for alias, b in clusters.items()]
    lines += [f"{flow}.enabled: true" for flow in flows]
    values: dict[str, Any] = {
        "topics": topics,
        "replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        # Off unless a test turns them on: every flow copies `heartbeats` whatever its
        # topics, and counts of copied records would include the beats of earlier tests.
        "emit.heartbeats.enabled": "false",
        # Off unless a test turns it on: beside the session's running Spark, the driver's
        # head start would copy most of a test's records itself, and Spark's tasks would not
        # be tested (test_leases tests the head start).
        "ferry.head.start.enabled": "false",
        "ferry.state.dir": directory / "state",
        **settings,
    }
    lines += [f"{key}: '{value}'" for key, value in values.items()]
    path = directory / "ferry.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_once(config: Path | FerryConfig, spark: Any) -> dict[str, FlowProgress]:
    cfg = config if isinstance(config, FerryConfig) else load_config(config)
    return {p.name: p for p in Runner(cfg, once=True, spark=spark).run()}


def run_beside(runner: Runner, actions: Callable[[], None]) -> list[FlowProgress]:
    """Run ferry in this thread and `actions` in another; ferry stops when they end.

    Spark's Python data sources resolve only in the thread that registered them, so ferry
    must run in the test's thread. A failure of `actions` is raised here.
    """
    failures: list[BaseException] = []

    def meanwhile() -> None:
        try:
            actions()
        except BaseException as exc:
            failures.append(exc)
        finally:
            runner.request_stop()

    beside = threading.Thread(target=meanwhile, daemon=True)
    beside.start()
    progress = runner.run()
    beside.join(30)
    if failures:
        raise failures[0]
    return progress


def without_origin(rec: Rec) -> Rec:
    headers = tuple(h for h in rec.headers if h[0] != ORIGIN_HEADER)
    return Rec(rec.partition, rec.key, rec.value, headers, rec.timestamp)


def origin_of(rec: Rec) -> bytes:
    values = [v for k, v in rec.headers if k == ORIGIN_HEADER]
    assert len(values) == 1, f"expected one {ORIGIN_HEADER} header, got {rec.headers}"
    assert values[0] is not None
    return values[0]
