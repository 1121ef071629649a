"""Commands for running on a Spark cluster: `ferry pack`, `ferry local spark up|down`,
`ferry local yarn up|down`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from ferry.terminal.console import out, styled

__all__ = ["pack", "spark_app", "yarn_app"]

spark_app = typer.Typer(
    help="A Spark standalone master and workers on 127.0.0.1 (pyspark's own Spark), for "
    "trying ferry on a cluster."
)

yarn_app = typer.Typer(
    help="YARN (a ResourceManager and NodeManagers) and HDFS (a NameNode and a DataNode) on "
    "127.0.0.1 in one JVM: Hadoop's own minicluster, for trying ferry on YARN and HDFS."
)

YarnDirOption = Annotated[
    Path | None,
    typer.Option(
        "--dir",
        help="Where the cluster keeps its Hadoop config directory, data and log "
        "(default ./.ferry-local/yarn)",
    ),
]

SparkDirOption = Annotated[
    Path | None,
    typer.Option(
        "--dir", help="Where the cluster keeps logs and work (default ./.ferry-local/spark)"
    ),
]


def pack(
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
) -> None:
    """Build (or find in the cache) the archive of ferry's environment that a `ferry run` on a
    cluster master ships to the executors."""
    import ferry
    from ferry.engine.spark.packing import ensure_archive
    from ferry.engine.spark.python_workers import default_cache_dir

    packed = ensure_archive(default_cache_dir())
    assert packed is not None
    entry = os.path.join(os.path.dirname(ferry.__file__), "__main__.py")
    result = {
        "archive": str(packed.path),
        "megabytes": round(packed.path.stat().st_size / 1e6, 1),
        "built": packed.built,
        "seconds": round(packed.seconds, 1),
        "workers_need": packed.interpreter,
        "platform": f"{packed.platform.system} {packed.platform.machine} "
        f"{packed.platform.libc}".strip(),
        "entry_point": entry,
    }
    if as_json:
        print(json.dumps(result))
        return
    what = "packed in" if packed.built else "found in the cache, checked in"
    out.print(styled((str(packed.path), "bold")))
    out.print(f"{result['megabytes']} MB, {what} {result['seconds']} s; for {result['platform']}")
    out.print(
        f"every worker needs Python at {packed.interpreter} (the archive links to it); "
        "`ferry run` on a cluster master ships the archive itself"
    )
    out.print(f"spark-submit entry point: {entry}")


@spark_app.command("up")
def spark_up(
    workers: Annotated[int, typer.Option(help="Number of workers")] = 2,
    cores: Annotated[int, typer.Option(help="Cores per worker")] = 1,
    memory: Annotated[str, typer.Option(help="Memory per worker, for its executors")] = "1g",
    directory: SparkDirOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the master's URLs as JSON")
    ] = False,
) -> None:
    """Start a Spark standalone master and N workers and wait until the master has them all."""
    from ferry.local import spark

    cluster = spark.up(directory, workers=workers, cores=cores, memory=memory)
    if as_json:
        print(json.dumps({"master": cluster.master_url, "webui": cluster.webui_url}))
        return
    out.print(styled("master ", (cluster.master_url, "bold"), f"  (web UI {cluster.webui_url})"))
    for process in cluster.processes:
        out.print(f"{process.role}: pid {process.pid}, log {process.log}")
    out.print(f"use it: spark.master = {cluster.master_url}")
    out.print(f"stop it with: ferry local spark down --dir {cluster.directory}")


@spark_app.command("down")
def spark_down(directory: SparkDirOption = None) -> None:
    """Stop exactly the master and workers `ferry local spark up` started in DIR."""
    from ferry.local import spark

    stopped = spark.down(directory)
    out.print(f"stopped: {', '.join(stopped)}" if stopped else "no running local Spark cluster")


@yarn_app.command("up")
def yarn_up(
    nodemanagers: Annotated[int, typer.Option(min=1, help="Number of NodeManagers")] = 2,
    node_memory: Annotated[
        int, typer.Option(min=512, help="Memory (MiB) each NodeManager offers to containers")
    ] = 3072,
    node_vcores: Annotated[int, typer.Option(min=1, help="Vcores each NodeManager offers")] = 2,
    namenode_port: Annotated[
        int, typer.Option(min=0, max=65535, help="HDFS NameNode port (0: a free one)")
    ] = 0,
    timeout: Annotated[float, typer.Option(help="Seconds to wait until it is ready")] = 180.0,
    directory: YarnDirOption = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='Print {"hadoop_conf_dir": ..., "hdfs": "hdfs://..."} only'),
    ] = False,
) -> None:
    """Start HDFS and YARN in one JVM, wait until every NodeManager registered, and write the
    Hadoop config directory HADOOP_CONF_DIR points at (core-site.xml, hdfs-site.xml,
    yarn-site.xml)."""
    from ferry.local import yarn

    cluster = yarn.up(
        directory,
        nodemanagers=nodemanagers,
        node_memory_mb=node_memory,
        node_vcores=node_vcores,
        namenode_port=namenode_port,
        timeout=timeout,
    )
    if as_json:
        print(json.dumps({"hadoop_conf_dir": cluster.hadoop_conf_dir, "hdfs": cluster.hdfs}))
        return
    out.print(styled("HDFS ", (cluster.hdfs, "bold")))
    out.print(
        f"YARN ResourceManager {cluster.resourcemanager} (web UI http://{cluster.webapp}), "
        f"{cluster.nodemanagers} NodeManagers of {node_memory} MiB and {node_vcores} vcores"
    )
    out.print(f"pid {cluster.pid}, ready in {cluster.seconds} s, log {cluster.log}")
    out.print(f"use it: export HADOOP_CONF_DIR={cluster.hadoop_conf_dir}")
    out.print(f"stop it with: ferry local yarn down --dir {cluster.directory}")


@yarn_app.command("down")
def yarn_down(directory: YarnDirOption = None) -> None:
    """Stop exactly the JVM `ferry local yarn up` started in DIR, with its containers."""
    from ferry.local import yarn

    stopped = yarn.down(directory)
    out.print("stopped: yarn, hdfs" if stopped else "no running local YARN cluster")
