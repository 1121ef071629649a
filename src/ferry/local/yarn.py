"""`ferry local yarn up/down`: YARN and HDFS on 127.0.0.1, Hadoop's own, in one JVM.

Hadoop's test clusters (`hadoop-client-minicluster`, the Hadoop release pyspark's
`hadoop-client-api` is) run a real NameNode and DataNode (MiniDFSCluster) and a real
ResourceManager and NodeManagers (MiniYARNCluster) in one process. Their jars are pinned in
the package's jar lock and downloaded once into the per-user cache (local/maven.py); the
process is `FerryMiniCluster.java` (beside this module), which Java 17 runs as a single source
file (compiled in memory, so it needs a JDK, not only a JRE). It writes a Hadoop configuration
directory (`core-site.xml` with `fs.defaultFS`, `yarn-site.xml` with the ResourceManager's
addresses) that `HADOOP_CONF_DIR` points at, then a ready file.

`DIR/yarn.json` records the process; `down` stops exactly that pid (checked against its start
time and the ready file in its command line, so a recycled pid is never signalled), with the
containers its NodeManagers started, which are its children.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import psutil

from ferry.errors import LocalClusterError
from ferry.local.broker import free_port, java_executable
from ferry.local.maven import download_bundle, holds
from ferry.local.processes import recorded_process, stop_process_tree

__all__ = [
    "HADOOP_VERSION",
    "YarnCluster",
    "default_dir",
    "down",
    "ensure_minicluster",
    "minicluster_bundle",
    "read_state",
    "up",
]

HADOOP_VERSION = "3.5.0"
STATE_FILE = "yarn.json"
READY_FILE = "ready.json"
LAUNCHER = "FerryMiniCluster.java"
# Sized for a 2-core machine with a few GiB to spare: each NodeManager offers 3 GiB and 2
# vcores, so it holds a client-mode application master (512 MiB + 384 MiB overhead, rounded
# up to 1 GiB) and a 512 MiB executor (1 GiB with its overhead), or two executors.
NODE_MEMORY_MB = 3072
NODE_VCORES = 2
# The JVM that holds the NameNode, DataNode, ResourceManager and NodeManagers.
DEFAULT_HEAP = "768m"


def hadoop_home() -> Path:
    """Where the jars live: $FERRY_HADOOP_HOME, or the per-user cache."""
    override = os.environ.get("FERRY_HADOOP_HOME")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "ferry" / f"hadoop-minicluster-{HADOOP_VERSION}"


def minicluster_bundle() -> str:
    """The jars' name in the jar lock."""
    return f"hadoop-minicluster-{HADOOP_VERSION}"


def ensure_minicluster(*, quiet: bool = True) -> Path:
    """Download the pinned jars once; later calls only check the completion mark."""
    home = hadoop_home()
    if holds(home, minicluster_bundle()):
        return home
    what = f"Hadoop {HADOOP_VERSION} minicluster jars"
    return download_bundle(home, minicluster_bundle(), what, quiet=quiet)


def default_dir() -> Path:
    return Path(os.environ.get("FERRY_LOCAL_DIR", ".ferry-local")) / "yarn"


@dataclass
class YarnCluster:
    """A running YARN + HDFS: its configuration directory, addresses, and the one process."""

    hadoop_conf_dir: str
    hdfs: str
    resourcemanager: str
    webapp: str
    nodemanagers: int
    directory: str
    pid: int
    started: float  # psutil's create_time: a recycled pid has another
    log: str
    marker: str  # the ready file, in its command line
    seconds: float  # from start to ready

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def process(self) -> psutil.Process | None:
        """The live process, if the pid is still the one started."""
        return recorded_process(self.pid, self.started, self.marker)


def read_state(directory: Path) -> YarnCluster | None:
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        return YarnCluster(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise LocalClusterError(f"{path} is not a ferry local YARN state file: {exc}") from exc


def _java_home(java: str) -> str:
    """The JDK `java` belongs to: the containers' launch scripts run $JAVA_HOME/bin/java."""
    home = Path(os.path.realpath(java)).parent.parent
    modules = subprocess.run(
        [java, "--list-modules"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    if "jdk.compiler" not in modules:
        raise LocalClusterError(
            f"{java} is a Java runtime without a compiler: ferry local yarn runs "
            f"{LAUNCHER} as a single source file, which needs a JDK (Java 17+), e.g. "
            "apt-get install openjdk-17-jdk-headless, or JAVA_HOME pointing at one"
        )
    return str(home)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


LOG4J = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
log4j.logger.org.apache.hadoop.yarn.server.resourcemanager.scheduler=WARN
log4j.logger.org.apache.hadoop.hdfs.StateChange=WARN
log4j.logger.org.apache.hadoop.hdfs.server.datanode.DataNode.clienttrace=WARN
"""


def up(
    directory: Path | None = None,
    *,
    nodemanagers: int = 2,
    node_memory_mb: int = NODE_MEMORY_MB,
    node_vcores: int = NODE_VCORES,
    namenode_port: int = 0,
    heap: str = DEFAULT_HEAP,
    timeout: float = 180.0,
) -> YarnCluster:
    """Start HDFS (a NameNode and one DataNode) and YARN (a ResourceManager and
    `nodemanagers` NodeManagers of `node_memory_mb` and `node_vcores` each) in one JVM; wait
    until every NodeManager registered and the configuration directory is written. A cluster
    already running in `directory` is refused."""
    if nodemanagers < 1:
        raise LocalClusterError("a local YARN cluster needs at least 1 NodeManager")
    directory = (directory or default_dir()).resolve()
    running = read_state(directory)
    if running is not None and running.process() is not None:
        raise LocalClusterError(
            f"a local YARN cluster already runs in {directory} (pid {running.pid}, "
            f"{running.hdfs}); stop it first: ferry local yarn down --dir {directory}"
        )
    if namenode_port and not _port_free(namenode_port):
        raise LocalClusterError(
            f"port {namenode_port} on 127.0.0.1 is in use: choose another --namenode-port "
            "(or 0 for a free one)"
        )
    java = java_executable()
    java_home = _java_home(java)
    libs = ensure_minicluster() / "libs"
    directory.mkdir(parents=True, exist_ok=True)
    # A fresh HDFS and fresh NodeManager directories every time (MiniYARNCluster keeps its
    # under ./target of its working directory).
    for old in ("data", "target", "conf"):
        shutil.rmtree(directory / old, ignore_errors=True)
    conf = directory / "conf"
    conf.mkdir()
    ready = directory / READY_FILE
    ready.unlink(missing_ok=True)
    log = directory / "yarn.log"
    (directory / "log4j.properties").write_text(LOG4J)
    launcher = resources.files("ferry.local").joinpath(LAUNCHER)
    with resources.as_file(launcher) as source:
        command = [
            java,
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{directory / 'log4j.properties'}",
            "-cp",
            str(libs / "*"),
            str(source),
            str(conf),
            str(directory / "data"),
            str(namenode_port or free_port()),
            str(nodemanagers),
            str(ready),
            f"yarn.nodemanager.resource.memory-mb={node_memory_mb}",
            # MiniYARNCluster gives each NodeManager this one instead (4096 by default): seen
            # here, the nodes offered 4096 MiB with only the key above set.
            f"yarn.minicluster.yarn.nodemanager.resource.memory-mb={node_memory_mb}",
            f"yarn.nodemanager.resource.cpu-vcores={node_vcores}",
            "yarn.scheduler.minimum-allocation-mb=256",
            f"yarn.scheduler.maximum-allocation-mb={node_memory_mb}",
            f"yarn.scheduler.maximum-allocation-vcores={node_vcores}",
            # Java's virtual memory is many times its heap; containers share this machine's
            # memory with everything else here, so neither limit kills them.
            "yarn.nodemanager.vmem-check-enabled=false",
            "yarn.nodemanager.pmem-check-enabled=false",
            # A full disk elsewhere on a shared machine must not mark the nodes unhealthy.
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage=99",
            "dfs.replication=1",
            # The capacity scheduler's one queue (the minicluster jar has no
            # capacity-scheduler.xml); application masters may take half of it.
            "yarn.scheduler.capacity.root.queues=default",
            "yarn.scheduler.capacity.root.default.capacity=100",
            "yarn.scheduler.capacity.root.default.maximum-capacity=100",
            "yarn.scheduler.capacity.maximum-am-resource-percent=0.5",
        ]
        env = {**os.environ, "JAVA_HOME": java_home}
        for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "PYSPARK_GATEWAY_PORT"):
            env.pop(name, None)
        begin = time.monotonic()
        with log.open("ab") as output:
            proc = subprocess.Popen(
                command,
                cwd=directory,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # survives the CLI that started it, and its Ctrl-C
            )
    started = psutil.Process(proc.pid).create_time()
    try:
        details = _wait_ready(proc, ready, log, timeout)
    except BaseException:
        _stop_pid(proc.pid, started, str(ready))
        raise
    cluster = YarnCluster(
        hadoop_conf_dir=str(conf),
        hdfs=details["hdfs"],
        resourcemanager=details["resourcemanager"],
        webapp=details["webapp"],
        nodemanagers=nodemanagers,
        directory=str(directory),
        pid=proc.pid,
        started=started,
        log=str(log),
        marker=str(ready),
        seconds=round(time.monotonic() - begin, 1),
    )
    tmp = directory / f"{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(cluster.to_json(), indent=2) + "\n")
    tmp.replace(directory / STATE_FILE)
    return cluster


def _wait_ready(
    proc: subprocess.Popen[bytes], ready: Path, log: Path, timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready.exists():
            with contextlib.suppress(ValueError):
                details: dict[str, Any] = json.loads(ready.read_text())
                return details
        if proc.poll() is not None:
            raise LocalClusterError(
                f"the local YARN/HDFS JVM exited with code {proc.returncode} while starting; "
                f"last lines of {log}:\n{_tail(log)}"
            )
        time.sleep(0.2)
    raise LocalClusterError(
        f"the local YARN/HDFS JVM (pid {proc.pid}) was not ready after {timeout:.0f}s and was "
        f"stopped; its log: {log}\n{_tail(log)}"
    )


def _stop_pid(pid: int, started: float, marker: str, timeout: float = 30.0) -> bool:
    cluster = YarnCluster("", "", "", "", 0, "", pid, started, "", marker, 0.0)
    proc = cluster.process()
    if proc is None:
        return False
    # The NodeManagers' containers (an application master, executors, their Python) are its
    # children: SIGTERM them all, SIGKILL what is left after `timeout`.
    stop_process_tree(proc, "the local YARN/HDFS JVM", timeout)
    return True


def down(directory: Path | None = None) -> bool:
    """Stop the JVM `up` started in `directory`, with its containers; True when it ran."""
    directory = (directory or default_dir()).resolve()
    cluster = read_state(directory)
    if cluster is None:
        return False
    stopped = _stop_pid(cluster.pid, cluster.started, cluster.marker)
    (directory / STATE_FILE).unlink(missing_ok=True)
    return stopped
