"""`ferry local spark up/down`: a Spark standalone master and N workers on 127.0.0.1.

Started from pyspark's own `bin/spark-class` (the Spark release pyspark ships), each in its
own session so it outlives the command, on free ports. `DIR/spark.json` records what was
started; `down` stops exactly those processes, by pid (checked against the start time and the
properties file in their command line, so a recycled pid is never signalled), with the
executors the workers started.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from ferry.errors import LocalClusterError
from ferry.local.broker import free_port
from ferry.local.processes import recorded_process, stop_process_tree

__all__ = [
    "SparkCluster",
    "SparkProcess",
    "down",
    "master_state",
    "read_state",
    "restart_worker",
    "up",
]

STATE_FILE = "spark.json"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
# A function that turns a worker's command into the one to run (tests hide the virtualenv
# from the workers this way).
Wrap = Callable[[list[str]], list[str]]


@dataclass
class SparkProcess:
    """One started master or worker JVM."""

    role: str  # "master", "worker-1", ...
    pid: int
    started: float  # psutil's create_time: a recycled pid has another
    log: str
    marker: str  # the properties file, in its command line

    def process(self) -> psutil.Process | None:
        """The live process, if the pid is still the one started."""
        return recorded_process(self.pid, self.started, self.marker)


@dataclass
class SparkCluster:
    """A running standalone cluster: where to submit, where its UI is, its processes."""

    master_url: str
    webui_url: str
    directory: str
    processes: list[SparkProcess] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def process(self, role: str) -> SparkProcess:
        return next(p for p in self.processes if p.role == role)


def default_dir() -> Path:
    return Path(os.environ.get("FERRY_LOCAL_DIR", ".ferry-local")) / "spark"


def spark_home() -> Path:
    from ferry.engine.spark.python_workers import spark_home as find

    home = find()
    if home is None or not (Path(home) / "bin" / "spark-class").exists():
        raise LocalClusterError(
            "pyspark's bin/spark-class was not found; reinstall pyspark (pip install pyspark)"
        )
    return Path(home)


def read_state(directory: Path) -> SparkCluster | None:
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        processes = [SparkProcess(**p) for p in raw.pop("processes")]
        return SparkCluster(**raw, processes=processes)
    except (ValueError, TypeError, KeyError) as exc:
        raise LocalClusterError(f"{path} is not a ferry local Spark state file: {exc}") from exc


def master_state(cluster: SparkCluster, timeout: float = 2.0) -> dict[str, Any]:
    """The master's own view (its REST `json/` page): workers, cores, applications."""
    answer = httpx.get(f"{cluster.webui_url}/json/", timeout=timeout, follow_redirects=True)
    answer.raise_for_status()
    state: dict[str, Any] = json.loads(answer.content)
    return state


def _launch(
    role: str, command: list[str], directory: Path, env: dict[str, str], marker: Path
) -> tuple[SparkProcess, subprocess.Popen[bytes]]:
    log = directory / f"{role}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # survives the CLI that started it, and its Ctrl-C
        )
    started = psutil.Process(proc.pid).create_time()
    return SparkProcess(role, proc.pid, started, str(log), str(marker)), proc


def _tail(path: str, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def up(
    directory: Path | None = None,
    *,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 90.0,
    wrap_worker: Wrap | None = None,
) -> SparkCluster:
    """Start a master and `workers` workers of `cores` cores and `memory` each; wait until the
    master counts them all alive. A cluster already running in `directory` is refused."""
    if workers < 1 or cores < 1:
        raise LocalClusterError("a local Spark cluster needs at least 1 worker of 1 core")
    directory = (directory or default_dir()).resolve()
    running = read_state(directory)
    if running is not None and any(p.process() for p in running.processes):
        raise LocalClusterError(
            f"a local Spark cluster already runs in {directory} ({running.master_url}); "
            f"stop it first: ferry local spark down --dir {directory}"
        )
    directory.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    # Every process names this file, so `down` knows it for ours.
    properties = directory / "spark-defaults.conf"
    properties.write_text("spark.ui.showConsoleProgress false\n")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    port, webui = free_port(), free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{webui}", str(directory))
    spark_class = str(home / "bin" / "spark-class")
    common = ["--host", "127.0.0.1", "--properties-file", str(properties)]
    started: list[tuple[SparkProcess, subprocess.Popen[bytes]]] = []
    try:
        master = [spark_class, MASTER, *common, "--port", str(port), "--webui-port", str(webui)]
        started.append(_launch("master", master, directory, env, properties))
        for n in range(1, workers + 1):
            command = _worker_command(cluster, n, cores, memory, properties)
            started.append(
                _launch(f"worker-{n}", (wrap_worker or list)(command), directory, env, properties)
            )
        cluster.processes = [p for p, _ in started]
        _wait_alive(cluster, started, workers, timeout)
    except BaseException:
        for process, _ in reversed(started):
            _stop(process)
        raise
    _write_state(cluster)
    return cluster


def _worker_command(
    cluster: SparkCluster, n: int, cores: int, memory: str, properties: Path
) -> list[str]:
    work = Path(cluster.directory) / f"worker-{n}"
    work.mkdir(exist_ok=True)
    return [
        str(spark_home() / "bin" / "spark-class"),
        WORKER,
        *("--host", "127.0.0.1", "--properties-file", str(properties)),
        *("--cores", str(cores), "--memory", memory),
        *("--port", str(free_port()), "--webui-port", str(free_port())),
        *("--work-dir", str(work)),
        cluster.master_url,
    ]


def restart_worker(
    cluster: SparkCluster,
    n: int,
    *,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 90.0,
    wrap_worker: Wrap | None = None,
) -> SparkProcess:
    """Start worker `n` again after it died (a node that comes back): same work directory,
    new ports; wait until the master counts every worker alive again. A worker `n` that is
    still running is refused."""
    role = f"worker-{n}"
    old = next((p for p in cluster.processes if p.role == role), None)
    if old is None:
        raise LocalClusterError(f"the local Spark cluster in {cluster.directory} has no {role}")
    if old.process() is not None:
        raise LocalClusterError(f"Spark {role} still runs (pid {old.pid}); stop it first")
    directory = Path(cluster.directory)
    properties = Path(old.marker)
    env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    command = _worker_command(cluster, n, cores, memory, properties)
    port = int(command[command.index("--port") + 1])
    process, proc = _launch(role, (wrap_worker or list)(command), directory, env, properties)
    cluster.processes = [process if p.role == role else p for p in cluster.processes]
    _write_state(cluster)
    try:
        _wait_registered(cluster, process, proc, port, timeout)
    except BaseException:
        _stop(process)
        raise
    return process


def _check_running(process: SparkProcess, proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        raise LocalClusterError(
            f"Spark {process.role} exited with code {proc.returncode} while starting; "
            f"last lines of {process.log}:\n{_tail(process.log)}"
        )


def _wait_registered(
    cluster: SparkCluster,
    process: SparkProcess,
    proc: subprocess.Popen[bytes],
    port: int,
    timeout: float,
) -> None:
    """Until the master lists the worker on `port` as ALIVE (the dead one it replaces may
    still count as alive until the master's worker timeout)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _check_running(process, proc)
        with contextlib.suppress(httpx.HTTPError, OSError, ValueError):
            workers = master_state(cluster).get("workers", [])
            if any(w.get("port") == port and w.get("state") == "ALIVE" for w in workers):
                return
        time.sleep(0.2)
    raise LocalClusterError(
        f"Spark {process.role} did not register with the master ({cluster.master_url}) "
        f"in {timeout:.0f}s; last lines of {process.log}:\n{_tail(process.log)}"
    )


def _write_state(cluster: SparkCluster) -> None:
    directory = Path(cluster.directory)
    tmp = directory / f"{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(cluster.to_json(), indent=2) + "\n")
    tmp.replace(directory / STATE_FILE)


def _wait_alive(
    cluster: SparkCluster,
    started: Sequence[tuple[SparkProcess, subprocess.Popen[bytes]]],
    workers: int,
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    alive = 0
    while time.monotonic() < deadline:
        for process, proc in started:
            _check_running(process, proc)
        with contextlib.suppress(httpx.HTTPError, OSError, ValueError):
            alive = int(master_state(cluster).get("aliveworkers", 0))
            if alive >= workers:
                return
        time.sleep(0.2)
    raise LocalClusterError(
        f"the Spark master ({cluster.master_url}) counted {alive} of {workers} workers alive "
        f"after {timeout:.0f}s; logs in {cluster.directory}"
    )


def _stop(process: SparkProcess, timeout: float = 20.0) -> bool:
    """SIGTERM the process and its children (a worker's executors and their Python), SIGKILL
    what is left after `timeout`. True when it was running."""
    proc = process.process()
    if proc is None:
        return False
    stop_process_tree(proc, f"Spark {process.role}", timeout)
    return True


def down(directory: Path | None = None) -> list[str]:
    """Stop every process `up` started in `directory` (workers first); their roles."""
    directory = (directory or default_dir()).resolve()
    cluster = read_state(directory)
    if cluster is None:
        return []
    stopped = [p.role for p in reversed(cluster.processes) if _stop(p)]
    (directory / STATE_FILE).unlink(missing_ok=True)
    return stopped
