"""YARN and HDFS on this machine (`ferry local yarn up`, Hadoop's own minicluster in one JVM):
the cluster the command starts; `ferry run` with `spark.master = yarn` (its environment
shipped to the containers through HDFS) copying exactly once while an executor's container is
SIGKILLed; and a Spark Structured Streaming query whose checkpoint and sink live on that HDFS
failed over to the replica with `ferry failover spark-checkpoint hdfs://...` and back (the
flow of test_spark_checkpoint_failover.py, on HDFS instead of local files). `make test-yarn`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pyspark
import pytest

from ferry.engine.spark.checkpoint_files import HadoopStorage
from ferry.local.cluster import LocalCluster
from tests.chaos.audit import NO_FAULTS, audit
from tests.chaos.observer import read_copies, read_source
from tests.ferry_cli import run_ferry
from tests.integration import executor_faults, test_reconcile
from tests.integration.executor_faults import (
    assert_ran_again,
    copying,
    finish,
    progress,
    sigkill_tree,
    wait_or_fail,
)
from tests.integration.extra_clusters import module_clusters
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    read_all,
    record_count,
    wait_for,
)
from tests.integration.replication_setup import write_config
from tests.integration.spark_workers import executor_of, executors_in_status
from tests.integration.test_spark_checkpoint_failover import (
    PARTITIONS,
    Writer,
    output_ids,
    start_query,
)

pytestmark = [pytest.mark.integration, pytest.mark.yarn]

private = module_clusters("P")
# A flow whose records were stranded on a lost A (test_reconcile's), on this module's clusters.
lost = test_reconcile.lost


def ferry(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ferry", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def yarn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`ferry local yarn up --json`, as a user starts it; `down` afterwards."""
    directory = tmp_path_factory.mktemp("yarn")
    started = ferry("local", "yarn", "up", "--dir", str(directory), "--json")
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        answer: dict[str, Any] = json.loads(started.stdout)
        state = json.loads((directory / "yarn.json").read_text())
        print(f"YARN/HDFS ready in {state['seconds']} s (pid {state['pid']})")
        yield {**answer, "state": state, "dir": directory}
    finally:
        stopped = ferry("local", "yarn", "down", "--dir", str(directory))
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "stopped" in stopped.stdout


def site(conf_dir: str, name: str) -> dict[str, str]:
    root = ET.parse(Path(conf_dir) / name).getroot()
    return {p.findtext("name", ""): p.findtext("value", "") for p in root.iter("property")}


def test_yarn_up_serves_hdfs_and_two_nodemanagers_from_its_config_directory(
    yarn_cluster: dict[str, Any], spark: Any
) -> None:
    conf, hdfs = yarn_cluster["hadoop_conf_dir"], yarn_cluster["hdfs"]
    assert hdfs.startswith("hdfs://127.0.0.1:")
    assert site(conf, "core-site.xml")["fs.defaultFS"] == hdfs
    rm = site(conf, "yarn-site.xml")["yarn.resourcemanager.address"]
    assert rm == yarn_cluster["state"]["resourcemanager"]

    # The ResourceManager's own view: two NodeManagers running, each offering 3 GiB.
    web = yarn_cluster["state"]["webapp"]
    nodes = httpx.get(f"http://{web}/ws/v1/cluster/nodes", timeout=10).json()["nodes"]["node"]
    assert [n["state"] for n in nodes] == ["RUNNING", "RUNNING"], nodes
    assert all(n["availMemoryMB"] + n["usedMemoryMB"] == 3072 for n in nodes), nodes

    # HDFS answers through Hadoop's FileSystem, as Spark and ferry use it.
    storage = HadoopStorage(spark, f"{hdfs}/ferry-test")
    storage.write("hello", b"over HDFS")
    assert storage.read("hello") == b"over HDFS"
    assert storage.names("") == ["hello"]

    # A second `up` in the same directory is refused while the first runs.
    again = ferry("local", "yarn", "up", "--dir", str(yarn_cluster["dir"]))
    assert again.returncode != 0
    assert "already runs" in again.stdout + again.stderr


def test_yarn_up_on_a_busy_namenode_port_says_so(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        refused = ferry("local", "yarn", "up", "--dir", str(tmp_path), "--namenode-port", str(port))
    assert refused.returncode != 0
    assert f"port {port} on 127.0.0.1 is in use" in refused.stdout + refused.stderr
    assert not (tmp_path / "yarn.json").exists()


@pytest.mark.timeout(900)
def test_ferry_run_on_yarn_copies_exactly_once_through_a_killed_executor_container(
    yarn_cluster: dict[str, Any],
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`spark.master = yarn` and HADOOP_CONF_DIR are all `ferry run` is given: the driver runs
    here (client mode), the executors in NodeManager containers, with ferry's environment
    shipped through HDFS (nothing of ferry is installed for them). One executor's container is
    SIGKILLed mid-copy: YARN gives Spark a new one, and every record arrives once, in order."""
    monkeypatch.setenv("HADOOP_CONF_DIR", yarn_cluster["hadoop_conf_dir"])
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, executor_faults.PARTITIONS)
    events = tmp_path / "events"
    events.mkdir()
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{
            "spark.master": "yarn",
            "spark.submit.deployMode": "client",
            "spark.executor.instances": 2,
            "spark.executor.cores": 1,
            "spark.executor.memory": "512m",
            "spark.yarn.am.memory": "512m",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.eventLog.buffer.kb": "1k",
            "exactly.once.source.support": "enabled",
        },
    )
    minicluster = psutil.Process(yarn_cluster["state"]["pid"])
    with copying(tmp_path, config, a, b, topic_name) as (traffic, monitor, ferry):
        wait_or_fail(lambda: len(executors_in_status(config)) == 2, ferry, "both executors copying")
        found = executor_of(minicluster)
        assert found is not None, "no executor container runs under the NodeManagers"
        killed, executor = found
        # Its container's working directory holds the environment YARN localized from HDFS.
        container = Path(executor.cwd())
        assert (container / "ferry-env" / "ferry-environment.json").exists(), container
        print(f"SIGKILL to executor {killed} (pid {executor.pid}) in {container.name}")
        sigkill_tree(executor)
        progress(monitor, ferry, f"copying after executor {killed}'s container was SIGKILLed")
        assert set(executors_in_status(config)) - {killed}, "ferry status shows no executor"
        result = finish(traffic, monitor, ferry, a, b, topic_name)

    assert result.total("copies") == result.total("source") > 0
    assert result.faults() == NO_FAULTS
    assert_ran_again(events, killed)


@pytest.mark.timeout(600)
def test_ferry_run_once_as_a_yarn_cluster_mode_application_through_spark_submit(
    yarn_cluster: dict[str, Any],
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """The driver in YARN's application master container too: spark-submit --deploy-mode
    cluster with the archive `ferry pack` built, put on HDFS as a real cluster keeps it
    (--archives hdfs://...), and the config (--files), as docs/operations/cluster.md gives the
    command. Nothing of the run is on this machine's side but spark-submit; the copy is exact."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    records = 1000
    produce(a, topic_name, [Rec(i % 2, None, f"v{i}".encode(), (), 0) for i in range(records)])
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{
            "exactly.once.source.support": "enabled",
            "ferry.state.dir": "ferry-state",  # in the container's working directory
        },
    )
    packed = ferry("pack", "--json")
    assert packed.returncode == 0, packed.stdout + packed.stderr
    pack = json.loads(packed.stdout)
    on_hdfs = f"{yarn_cluster['hdfs']}/apps/ferry/{Path(pack['archive']).name}"
    hadoop = spark._jvm.org.apache.hadoop.fs
    filesystem = hadoop.Path(on_hdfs).getFileSystem(spark._jsc.hadoopConfiguration())
    filesystem.copyFromLocalFile(hadoop.Path(Path(pack["archive"]).as_uri()), hadoop.Path(on_hdfs))
    submit = Path(sys.executable).parent / "spark-submit"
    env = {
        **os.environ,
        "HADOOP_CONF_DIR": yarn_cluster["hadoop_conf_dir"],
        "SPARK_HOME": str(Path(pyspark.__file__).parent),  # pyspark's own Spark
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    submitted = subprocess.run(
        [
            str(submit),
            "--master",
            "yarn",
            "--deploy-mode",
            "cluster",
            "--driver-memory",
            "512m",
            "--num-executors",
            "1",
            "--executor-cores",
            "1",
            "--executor-memory",
            "512m",
            "--archives",
            f"{on_hdfs}#ferry-env",
            "--conf",
            "spark.pyspark.python=./ferry-env/bin/python",
            "--conf",
            "spark.pyspark.driver.python=./ferry-env/bin/python",
            "--files",
            str(config),
            pack["entry_point"],
            "run",
            "-c",
            "ferry.yaml",
            "--once",
        ],
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-5000:]
    assert "final status: SUCCEEDED" in submitted.stderr, submitted.stderr[-3000:]
    result = audit(read_source(a, topic_name, 2), read_copies(b, f"A.{topic_name}", 2))
    assert result.faults() == NO_FAULTS
    assert result.total("copies") == result.total("source") == records


def test_reconcile_exports_the_stranded_records_to_hdfs(
    lost: test_reconcile.Lost, yarn_cluster: dict[str, Any], spark: Any, tmp_path: Path
) -> None:
    """`ferry reconcile --export hdfs://...`: the records A acknowledged but never copied, as
    Parquet on HDFS, read back through Hadoop's FileSystem; nothing written to B."""
    config = lost.config(tmp_path, "export")
    target = f"{yarn_cluster['hdfs']}/stranded"
    exported = run_ferry(
        "reconcile", "-c", str(config), "--flow", "A->B", "--export", target, "--json"
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    applied = json.loads(exported.stdout)["applied"]
    assert applied == {"action": "export", "written": 15, "directory": f"{target}/A-to-B"}
    rows = spark.read.parquet(f"{target}/A-to-B").collect()
    assert sorted(r["value"].decode() for r in rows) == sorted(lost.stranded["export"])
    assert {r["topic"] for r in rows} == {lost.topic("export")}
    assert HadoopStorage(spark, target).names("") == ["A-to-B"]
    report = run_ferry("reconcile", "-c", str(config), "--flow", "A->B", "--report-only", "--json")
    assert report.returncode == 3 and json.loads(report.stdout)["stranded"] == 15


class Hdfs:
    """A checkpoint's and a sink's logs on HDFS, as test_spark_checkpoint_failover reads them
    from local files."""

    def __init__(self, spark: Any, checkpoint: str, output: str) -> None:
        self.checkpoint = HadoopStorage(spark, checkpoint)
        self.sink = HadoopStorage(spark, f"{output}/_spark_metadata")

    def committed(self) -> list[int]:
        return sorted(int(n) for n in self.checkpoint.names("commits") if n.isdigit())

    def sink_log(self) -> list[int]:
        names = (n.removesuffix(".compact") for n in self.sink.names(""))
        return sorted(int(n) for n in names if n.isdigit())

    def crash(self, batch: int, *, sink_committed: bool) -> None:
        """As test_spark_checkpoint_failover.crash: Spark stopped during batch `batch`."""
        logs = [(self.checkpoint, "commits/")] + ([] if sink_committed else [(self.sink, "")])
        for storage, folder in logs:
            for name in (str(batch), f"{batch}.compact"):
                storage.delete(f"{folder}{name}")
                storage.delete(f"{folder}.{name}.crc")

    def files(self) -> dict[str, bytes | None]:
        """The checkpoint's top level and its offset and commit logs' files, by path."""
        found: dict[str, bytes | None] = {
            "": b" ".join(n.encode() for n in self.checkpoint.names(""))
        }
        found["metadata"] = self.checkpoint.read("metadata")
        for folder in ("offsets", "commits"):
            for name in self.checkpoint.names(folder):
                found[f"{folder}/{name}"] = self.checkpoint.read(f"{folder}/{name}")
        return found


@pytest.mark.parametrize(
    ("sink_committed", "planned"),
    [(False, "removed"), (True, "translated")],
    ids=["sink-did-not-write-the-planned-batch", "sink-wrote-it"],
)
def test_a_spark_query_with_its_checkpoint_on_hdfs_fails_over_and_back_reading_each_record_once(
    sink_committed: bool,
    planned: str,
    yarn_cluster: dict[str, Any],
    private: dict[str, LocalCluster],
    kafka_clusters: dict[str, LocalCluster],
    spark: Any,
    tmp_path: Path,
) -> None:
    p_broker, b = private["P"], kafka_clusters["B"].bootstrap
    p = p_broker.bootstrap
    topic = f"events-{uuid.uuid4().hex[:8]}"
    remote = f"P.{topic}"
    create_topic(p, topic, PARTITIONS)
    config = write_config(
        tmp_path, {"P": p_broker, "B": kafka_clusters["B"]}, flows=("P->B",), topics=topic
    )
    base = f"{yarn_cluster['hdfs']}/queries/{topic}"
    checkpoint, output = f"{base}/checkpoint", f"{base}/out"
    logs = Hdfs(spark, checkpoint, output)

    writer = Writer(p, topic)
    try:
        query = start_query(spark, p, topic, checkpoint, output)
        try:
            wait_for(lambda: len(logs.committed()) >= 3, 120, "3 batches committed on P")
        finally:
            query.stop()
        copied = run_ferry("run", "-c", str(config), "--once")
        assert copied.returncode == 0, copied.stderr
        wait_for(
            lambda: record_count(p, topic) > record_count(b, remote) + 50, 60, "P ahead of its copy"
        )
        run = start_query(spark, p, topic, checkpoint, output, availableNow=True)
        assert run.awaitTermination(120), "the one batch on P did not end in 120 s"
        assert run.exception() is None, run.exception()
        last = logs.committed()[-1]
        assert logs.sink_log()[-1] == last
        if planned == "translated":
            again = run_ferry("run", "-c", str(config), "--once")
            assert again.returncode == 0, again.stderr
        logs.crash(last, sink_committed=sink_committed)
    finally:
        acked = writer.stop()
    before_failover = output_ids(spark, output)
    p_broker.stop()  # P is lost

    # `ferry failover spark-checkpoint hdfs://...`: a dry run changes nothing on HDFS.
    files_before = logs.files()
    failover = [
        "failover",
        "spark-checkpoint",
        checkpoint,
        "-c",
        str(config),
        "--sink-log",
        f"{output}/_spark_metadata",
        "--from",
        "P",
        "--to",
        "B",
        "--json",
    ]
    dry = run_ferry(*failover, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    shown = json.loads(dry.stdout.splitlines()[0])
    assert shown["planned_batch"] == last and shown["planned_batch_action"] == planned
    assert logs.files() == files_before
    done = run_ferry(*failover)
    assert done.returncode == 0, done.stdout + done.stderr
    moved = json.loads(done.stdout.splitlines()[0])
    assert moved["subscribe"] == remote and not moved["dry_run"]
    assert (
        logs.checkpoint.read(f"{moved['backup']}/offsets/{last}") == files_before[f"offsets/{last}"]
    )
    assert logs.checkpoint.exists(f"offsets/{last}") == (planned != "removed")

    on_b_query = start_query(spark, b, remote, checkpoint, output)
    try:
        on_b_query.processAllAvailable()
    finally:
        on_b_query.stop()
    assert on_b_query.exception() is None, on_b_query.exception()
    on_b = [
        rec.value.decode()
        for rec in read_all(b, remote, PARTITIONS, record_count(b, remote))
        if rec.value
    ]
    after_failover = output_ids(spark, output)
    assert set(on_b) <= set(acked)
    assert all(n == 1 for n in after_failover.values()), [
        i for i, n in after_failover.items() if n > 1
    ][:10]
    assert set(after_failover) == set(on_b) | set(before_failover)

    # Failback to P, through the same command on HDFS.
    p_broker.restart()
    back_args = [a if a not in ("P", "B") else {"P": "B", "B": "P"}[a] for a in failover]
    back = run_ferry(*back_args)
    assert back.returncode == 0, back.stdout + back.stderr
    returned = json.loads(back.stdout.splitlines()[0])
    assert returned["subscribe"] == topic
    final_query = start_query(spark, p, topic, checkpoint, output)
    try:
        final_query.processAllAvailable()
    finally:
        final_query.stop()
    assert final_query.exception() is None, final_query.exception()
    final = output_ids(spark, output)
    assert set(final) == set(acked)  # every acknowledged record
    assert all(n == 1 for n in final.values()), [i for i, n in final.items() if n > 1][:10]
