"""`ferry status` answers from the clusters, so any machine sees where replication stands."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce
from tests.integration.replication_setup import run_once, write_config

pytestmark = pytest.mark.integration

NOW_MS = int(time.time() * 1000)


@pytest.mark.parametrize("mode", ["disabled", "enabled"])
def test_status_on_another_machine_shows_the_replicated_position_and_no_lag(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    topic = f"{topic_name}-{mode}"
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic, 3)
    produce(a, topic, [Rec(i % 3, b"k", b"v%d" % i, (), NOW_MS + i) for i in range(600)])
    runner_dir = tmp_path / "runner"
    runner_dir.mkdir()
    run_once(
        write_config(
            runner_dir, kafka_clusters, topics=topic, **{"exactly.once.source.support": mode}
        ),
        spark,
    )
    # Another machine: the same clusters and flow, a state directory ferry never ran in.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = write_config(elsewhere, kafka_clusters, topics=topic)
    result = run_ferry("status", "-c", str(config), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    flow = json.loads(result.stdout)["flows"]["A->B"]
    assert flow["errors"] == []
    assert flow["lag"] == 0
    assert {(p["partition"], p["source_end"], p["replicated"]) for p in flow["partitions"]} == {
        (p, 200, 200) for p in range(3)
    }


def test_status_exits_non_zero_naming_a_cluster_that_does_not_answer(
    kafka_clusters: dict[str, LocalCluster], tmp_path: Path
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        f"clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\n"
        f"B.bootstrap.servers = {kafka_clusters['B'].bootstrap}\nA->B.enabled = true\n"
    )
    result = run_ferry("status", "-c", str(config), timeout=120)
    assert result.returncode == 1, result.stdout
    assert "flow A->B: cluster A (127.0.0.1:1) is unreachable" in result.stderr
