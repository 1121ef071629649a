"""`ferry run` on a Spark standalone cluster whose workers never had ferry installed.

Two workers of one core each, started by `ferry.local.spark` from pyspark's own spark-class,
each in a mount namespace where a tmpfs hides this virtualenv (and ferry's source tree): what
a node without ferry looks like. Only the environment ferry ships can run the flow there.
Spark's own records (the application's event log) say where the tasks ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ferry
from ferry.local import spark as local_spark
from ferry.local.broker import BrokerProcess
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count
from tests.integration.replication_setup import write_config

pytestmark = pytest.mark.integration

# Mount Spark's home where the workers can see it, then hide the virtualenv (and the source
# tree of an editable ferry) behind empty tmpfs mounts, then run the worker from there.
HIDE = """set -e
home=$1; seen=$2; shift 2
mount --bind "$home" "$seen"
while [ "$1" != -- ]; do mount -t tmpfs -o size=1m tmpfs "$1"; shift; done
shift
export SPARK_HOME="$seen"
exec "$@"
"""


def _hidden() -> list[str]:
    """Directories a node without ferry does not have: the virtualenv, ferry's source tree."""
    hidden = [sys.prefix]
    source = Path(ferry.__file__).resolve().parent.parent
    if not source.is_relative_to(sys.prefix):
        hidden.append(str(source))
    return hidden


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    check = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return check.returncode == 0


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_spark.SparkCluster]:
    if not _can_unshare():
        pytest.skip("needs `unshare -m` with mount rights, to hide the virtualenv from workers")
    directory = tmp_path_factory.mktemp("spark-cluster")
    home = local_spark.spark_home()
    seen = directory / "spark-home"  # where the workers see Spark's home
    seen.mkdir()

    def hide_ferry(command: list[str]) -> list[str]:
        spark_class = str(seen / Path(command[0]).relative_to(home))
        return [
            *("unshare", "-m", "--propagation", "private", "sh", "-c", HIDE, "hide"),
            *(str(home), str(seen), *_hidden(), "--", spark_class, *command[1:]),
        ]

    cluster = local_spark.up(directory, workers=2, cores=1, memory="1g", wrap_worker=hide_ferry)
    try:
        yield cluster
    finally:
        assert set(local_spark.down(directory)) == {"master", "worker-1", "worker-2"}
        assert all(p.process() is None for p in cluster.processes)


def _tasks_by_executor(event_logs: Path) -> dict[str, dict[str, int]]:
    """Per executor id, its tasks by how they ended, from the application's Spark event log:
    `Success`, `ferry` (failed in ferry's own code, which then ran there: a retriable error
    such as a coordinator still loading on a fresh cluster; Spark retried it), or Spark's
    reason."""
    ended: dict[str, dict[str, int]] = {}
    for log in event_logs.rglob("events_*"):  # Spark 4 writes a directory of rolled files
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") != "SparkListenerTaskEnd":
                continue
            reason = event["Task End Reason"]
            how = reason["Reason"]
            if how != "Success" and "[ferry-error:" in reason.get("Description", ""):
                how = "ferry"
            counts = ended.setdefault(event["Task Info"]["Executor ID"], {})
            counts[how] = counts.get(how, 0) + 1
    return ended


def test_a_flow_runs_on_workers_without_ferry_from_the_shipped_environment(
    spark_cluster: local_spark.SparkCluster,
    kafka_clusters: dict[str, BrokerProcess],
    topic_name: str,
    tmp_path: Path,
) -> None:
    worker = spark_cluster.process("worker-1").pid
    for hidden in _hidden():
        # The worker's view of the machine: the virtualenv is an empty mount there.
        assert not os.path.exists(f"/proc/{worker}/root{hidden}/bin/python"), hidden
        assert os.listdir(f"/proc/{worker}/root{hidden}") == []

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

    by_executor = _tasks_by_executor(events)
    print(f"tasks per executor: {by_executor}")
    ran_ferry = {e for e, ended in by_executor.items() if {"Success", "ferry"} & set(ended)}
    assert len(ran_ferry) == 2, f"tasks per executor: {by_executor}"
    # ferry's own account agrees: who copied what, by Spark's executor ids.
    status = subprocess.run(
        [sys.executable, "-m", "ferry", "status", "-c", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    executors = json.loads(status.stdout)["flows"]["A->B"]["executors"]
    assert set(executors) == ran_ferry, executors
    assert sum(e["records"] for e in executors.values()) == records, executors
    for n in (1, 2):
        work = Path(spark_cluster.directory) / f"worker-{n}"
        unpacked = list(work.glob("app-*/*/ferry-env/ferry-environment.json"))
        assert unpacked, f"worker-{n}'s executor did not unpack ferry's environment"
