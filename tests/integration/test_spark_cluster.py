"""`ferry run` on a Spark standalone cluster whose workers never had ferry installed
(`spark_cluster`, tests/integration/conftest.py): only the environment ferry ships can run
the flow there. Spark's own records (the application's event log) say where the tasks ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ferry.local import spark as local_spark
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count
from tests.integration.replication_setup import write_config
from tests.integration.spark_workers import executors_in_status, hidden, tasks_by_executor

# A standalone master and two workers of its own: `make test-cluster`, with executors lost.
pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_a_flow_runs_on_workers_without_ferry_from_the_shipped_environment(
    spark_cluster: local_spark.SparkCluster,
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
) -> None:
    worker = spark_cluster.process("worker-1").pid
    for directory in hidden():
        # The worker's view of the machine: the virtualenv is an empty mount there.
        assert not os.path.exists(f"/proc/{worker}/root{directory}/bin/python"), directory
        assert os.listdir(f"/proc/{worker}/root{directory}") == []

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 4)
    records = 4000
    produce(a, topic_name, [Rec(i % 4, None, f"v{i}".encode(), (), 0) for i in range(records)])
    events = tmp_path / "events"
    events.mkdir()
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{
            "spark.master": spark_cluster.master_url,
            "spark.executor.cores": 1,
            "spark.executor.memory": "512m",
            # Schedule only once both executors registered, so both are offered tasks.
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
            "ferry.bins": 2,
        },
    )
    run = subprocess.run(
        [sys.executable, "-m", "ferry", "run", "-c", str(config), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    print(run.stdout)
    assert record_count(b, f"A.{topic_name}") == records

    by_executor = tasks_by_executor(events)
    print(f"tasks per executor: {by_executor}")
    ran_ferry = {e for e, ended in by_executor.items() if {"Success", "ferry"} & set(ended)}
    assert len(ran_ferry) == 2, f"tasks per executor: {by_executor}"
    # ferry's own account agrees: who copied what, by Spark's executor ids.
    executors = executors_in_status(config)
    assert set(executors) == ran_ferry, executors
    assert sum(e["records"] for e in executors.values()) == records, executors
    for n in (1, 2):
        work = Path(spark_cluster.directory) / f"worker-{n}"
        unpacked = list(work.glob("app-*/*/ferry-env/ferry-environment.json"))
        assert unpacked, f"worker-{n}'s executor did not unpack ferry's environment"
