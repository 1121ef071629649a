"""Commands for running on a Spark cluster: `ferry pack`, `ferry local spark up|down`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from ferry.terminal.console import out, styled

__all__ = ["pack", "spark_app"]

spark_app = typer.Typer(
    help="A Spark standalone master and workers on 127.0.0.1 (pyspark's own Spark), for "
    "trying ferry on a cluster."
)

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
