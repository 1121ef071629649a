"""One real KRaft Kafka node (a JVM) on 127.0.0.1: a whole single-node cluster (broker and
controller in one process), or one node of a larger cluster (`ferry.local.cluster`).

The node runs in its own session so it outlives `ferry local up`, and is stopped by the pid
recorded at start, never by name. Its pid file also records the server.properties path, so a
recycled pid that now belongs to another process is never signalled.
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from ferry.errors import LocalClusterError
from ferry.kafka import clients
from ferry.local.distribution import kafka_classpath
from ferry.local.processes import kill_process, live_process, running_command_line, stop_process

__all__ = [
    "BrokerProcess",
    "NodePlan",
    "free_port",
    "launch",
    "prepare_node",
    "restart_broker",
    "start_broker",
]

# Kafka defaults sized for one node on a small machine. auto.create.topics.enable is off so
# that code which forgets to create a topic fails in tests instead of working by accident.
_DEFAULTS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

_LOG4J2 = """\
status = error
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log}
appender.file.filePattern = {log}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


# Every port free_port handed out in this process: a port is only checked free, not held, until
# its server binds it, so two nodes planned before either starts (six nodes and their link
# proxies in one `ferry local up`) could otherwise draw the same one and the second fail to bind.
_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now, below the kernel's ephemeral
    range, and never handed out before by this process: a port the kernel hands out (bind to
    0) may be taken, before the broker binds it, as the local end of some client's outgoing
    connection; with six nodes and their clients connecting that happened within a test
    session."""
    low, _ = _ephemeral_range()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10_000, max(10_001, low))
        with _HANDED_OUT_LOCK:
            if port in _HANDED_OUT:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    raise LocalClusterError("no free port on 127.0.0.1 below the ephemeral range")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class BrokerProcess:
    """A started broker: where it listens, where its files are, which process it is."""

    alias: str
    pid: int
    port: int
    controller_port: int
    directory: str
    overrides: dict[str, str] = field(default_factory=dict)
    # librdkafka settings a client needs to talk to this broker (e.g. SASL credentials when the
    # overrides make its listener SASL); on a secure cluster, those of the `ferry` principal.
    client: dict[str, str] = field(default_factory=dict)
    # A super user's settings on a secure cluster (`ferry local up --security`); else empty,
    # and `client` is the one to use for administration too. Used for the readiness check.
    admin: dict[str, str] = field(default_factory=dict)
    security: str = "plaintext"
    node_id: int = 1
    roles: str = "broker,controller"
    # The listener a link proxy forwards to (0: none) and the proxy's port, which the node
    # advertises on that listener, so clients that bootstrap through the proxy stay behind it.
    link_port: int = 0
    proxy_port: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def client_settings(self) -> dict[str, str]:
        """librdkafka settings for ferry's clients, bootstrap.servers included."""
        return {"bootstrap.servers": self.bootstrap, **self.client}

    @property
    def admin_settings(self) -> dict[str, str]:
        """librdkafka settings of a principal allowed everything (the client's when plain)."""
        return {"bootstrap.servers": self.bootstrap, **(self.admin or self.client)}

    @property
    def properties_file(self) -> Path:
        return Path(self.directory) / "server.properties"

    @property
    def log_file(self) -> Path:
        return Path(self.directory) / "broker.log"

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @property
    def pid_file(self) -> Path:
        """The pid of the node's latest start: a node restarted by another process (a test,
        `ferry local start`) is found by it, though this record holds the older pid."""
        return Path(self.directory) / "node.pid"

    def is_running(self) -> bool:
        """True while the node's latest pid is still this broker (not a recycled pid)."""
        with contextlib.suppress(OSError, ValueError):
            self.pid = int(self.pid_file.read_text())
        cmdline = running_command_line(self.pid)
        return cmdline is not None and any(str(self.properties_file) in arg for arg in cmdline)

    def log_tail(self, lines: int = 15) -> str:
        """The broker's first ERROR lines (the cause) and its last lines (how it ended)."""
        texts = []
        for path in (Path(self.directory) / "stdout.log", self.log_file):
            if path.exists():
                texts.extend(path.read_text(errors="replace").splitlines())
        errors = [t for t in texts if " ERROR " in t or " FATAL " in t or "Caused by" in t]
        parts = []
        if errors:
            parts.append("first errors:\n" + "\n".join(errors[:8]))
        parts.append("last lines:\n" + "\n".join(texts[-lines:]))
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it has not exited within `timeout`."""
        stop_process(self._process(), self._name(), timeout)
        self._wait_ports_closed(10.0)

    def kill(self) -> None:
        """SIGKILL, as a crash would: for fault tests."""
        kill_process(self._process(), self._name())
        self._wait_ports_closed(10.0)

    def send(self, sig: signal.Signals) -> None:
        """Send `sig` to the node if it is still this node: SIGSTOP freezes it (a GC pause, a
        frozen VM), SIGCONT wakes it."""
        if not self.is_running():
            raise LocalClusterError(
                f"node {self.node_id} of cluster {self.alias} (pid {self.pid}) is not running"
            )
        os.kill(self.pid, sig)

    def _name(self) -> str:
        return f"broker {self.alias} node {self.node_id}"

    def _process(self) -> psutil.Process | None:
        """The node's process while it is still this node (see is_running), else None."""
        return live_process(self.pid) if self.is_running() else None

    def _wait_ports_closed(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        ports = [p for p in (self.port, self.controller_port, self.link_port) if p]
        while time.monotonic() < deadline:
            if not any(_port_open(p) for p in ports):
                return
            time.sleep(0.05)
        raise LocalClusterError(
            f"broker {self.alias} node {self.node_id} stopped but one of ports "
            f"{', '.join(map(str, ports))} still accepts connections"
        )


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class NodePlan:
    """Where one node listens and what it is, decided before any node of its cluster starts:
    every controller must know every other controller's address."""

    node_id: int
    roles: str  # "broker,controller" or "broker"
    port: int
    controller_port: int  # 0 on a broker-only node
    link_port: int = 0
    proxy_port: int = 0

    @staticmethod
    def pick(node_id: int, roles: str, *, link: bool = False) -> NodePlan:
        """Free ports for a node (a controller port only when it is a controller)."""
        return NodePlan(
            node_id,
            roles,
            free_port(),
            free_port() if "controller" in roles else 0,
            free_port() if link else 0,
            free_port() if link else 0,
        )


def _server_properties(
    directory: Path, plan: NodePlan, overrides: Mapping[str, str], voters: str | None
) -> dict[str, str]:
    """`voters` (`id@host:port,...`) names a fixed controller quorum; None makes the node a
    standalone cluster of its own (the single-node default)."""
    props = dict(_DEFAULTS)
    listeners = [f"PLAINTEXT://127.0.0.1:{plan.port}"]
    advertised = [f"PLAINTEXT://127.0.0.1:{plan.port}"]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    if plan.controller_port:
        listeners.append(f"CONTROLLER://127.0.0.1:{plan.controller_port}")
        advertised.append(f"CONTROLLER://127.0.0.1:{plan.controller_port}")
    if plan.link_port:
        listeners.append(f"LINK://127.0.0.1:{plan.link_port}")
        advertised.append(f"LINK://127.0.0.1:{plan.proxy_port}")
        protocols.append("LINK:PLAINTEXT")
    props.update(
        {
            "process.roles": plan.roles,
            "node.id": str(plan.node_id),
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(directory / "data"),
        }
    )
    if voters is None:
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{plan.controller_port}"
    else:
        props["controller.quorum.voters"] = voters
    # Overrides may refer to the ports chosen here, e.g. a SASL listener on {port}.
    for key, value in overrides.items():
        props[key] = value.format(port=plan.port, controller_port=plan.controller_port)
    return props


def java_executable() -> str:
    """The `java` local clusters run on: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(home, "bin", "java")] if home else []
    found = next((c for c in candidates if os.access(c, os.X_OK)), None) or shutil.which("java")
    if found is None:
        raise LocalClusterError(
            "Java is not installed (no java on PATH"
            + (f" nor in JAVA_HOME={home}" if home else "")
            + "): Kafka's brokers and Spark need Java 17, e.g. apt-get install "
            "openjdk-17-jre-headless"
        )
    return found


def jvm_performance_options() -> list[str]:
    """The brokers' JVM tuning: `KAFKA_JVM_PERFORMANCE_OPTS` when set (the variable Kafka's own
    start scripts read, split on spaces), else G1. A test session sets it to a JIT that stops at
    C1 and the serial collector: six brokers copying a few hundred records a second on two cores
    otherwise spent about half their CPU in the C2 compiler."""
    configured = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", "").split()
    return configured or ["-XX:+UseG1GC"]


def _java_command(directory: Path, main: str, *args: str, heap: str) -> list[str]:
    return [
        java_executable(),
        f"-Xmx{heap}",
        "-Xms128m",
        *jvm_performance_options(),
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}",
        "-cp",
        kafka_classpath(),
        main,
        *args,
    ]


def start_broker(
    alias: str,
    directory: Path,
    overrides: Mapping[str, str] | None = None,
    *,
    heap: str = "512m",
    timeout: float = 60.0,
    client: Mapping[str, str] | None = None,
    admin: Mapping[str, str] | None = None,
    security: str = "plaintext",
    format_args: Sequence[str] = (),
) -> BrokerProcess:
    """Start a single-node cluster: format storage, start the JVM and wait until the broker
    answers a metadata request from a client configured with `admin` or else `client`
    (librdkafka settings, e.g. SASL credentials). `format_args` go to Kafka's storage tool
    (e.g. SCRAM users)."""
    broker = prepare_node(
        alias,
        directory,
        NodePlan.pick(1, "broker,controller"),
        overrides or {},
        cluster_id=None,
        client=client or {},
        admin=admin or {},
        security=security,
        format_args=format_args,
    )
    _launch(broker, heap=heap, timeout=timeout)
    return broker


def prepare_node(
    alias: str,
    directory: Path,
    plan: NodePlan,
    overrides: Mapping[str, str],
    *,
    cluster_id: str | None,
    voters: str | None = None,
    client: Mapping[str, str] | None = None,
    admin: Mapping[str, str] | None = None,
    security: str = "plaintext",
    format_args: Sequence[str] = (),
) -> BrokerProcess:
    """Write a node's configuration and format its storage (once); nothing is started.
    `cluster_id` None: a fresh id, for a standalone node; a cluster's nodes share one."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    props = _server_properties(directory, plan, overrides, voters)
    properties_file = directory / "server.properties"
    properties_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (directory / "log4j2.properties").write_text(_LOG4J2.format(log=directory / "broker.log"))

    if not (directory / "data" / "meta.properties").exists():
        standalone = ("--standalone",) if voters is None else ()
        format_storage(
            alias,
            directory,
            properties_file,
            cluster_id or _cluster_id(),
            (*standalone, *format_args),
        )
    bootstrap = {"bootstrap.servers": f"127.0.0.1:{plan.port}"}
    return BrokerProcess(
        alias,
        0,
        plan.port,
        plan.controller_port,
        str(directory),
        dict(overrides),
        # bootstrap.servers first, so `clusters.json` holds every setting a client needs.
        {**bootstrap, **(client or {})},
        {**bootstrap, **admin} if admin else {},
        security,
        plan.node_id,
        plan.roles,
        plan.link_port,
        plan.proxy_port,
    )


def format_storage(
    alias: str,
    directory: Path,
    properties_file: Path,
    cluster_id: str,
    extra_args: Sequence[str] = (),
) -> None:
    """Format a KRaft log directory for a node of `cluster_id` (`--standalone` in
    `extra_args` for a single-node cluster's own quorum)."""
    fmt = subprocess.run(
        _java_command(
            directory,
            "kafka.tools.StorageTool",
            "format",
            # `=` form: a random id may start with '-', which argparse would take for an option.
            f"--cluster-id={cluster_id}",
            f"--config={properties_file}",
            *extra_args,
            heap="256m",
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    if fmt.returncode != 0:
        raise LocalClusterError(
            f"formatting storage for cluster {alias} in {directory} failed:\n"
            f"{fmt.stdout}{fmt.stderr}"
        )


def restart_broker(broker: BrokerProcess, *, heap: str = "512m", timeout: float = 60.0) -> None:
    """Start a stopped or killed broker again on the same ports and data (for fault tests)."""
    if broker.is_running():
        raise LocalClusterError(f"broker {broker.alias} (pid {broker.pid}) is still running")
    _launch(broker, heap=heap, timeout=timeout)


def _launch(broker: BrokerProcess, *, heap: str, timeout: float) -> None:
    process = launch(broker, heap=heap)
    try:
        _wait_until_ready(broker, process, timeout)
    except LocalClusterError:
        broker.kill()
        raise


def launch(broker: BrokerProcess, *, heap: str) -> subprocess.Popen[bytes]:
    """Start the node's JVM and return at once (a quorum's nodes start together)."""
    directory = Path(broker.directory)
    with (directory / "stdout.log").open("ab") as out:
        process = subprocess.Popen(
            _java_command(directory, "kafka.Kafka", str(broker.properties_file), heap=heap),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # survives the CLI that started it, and its Ctrl-C
        )
    broker.pid = process.pid
    broker.pid_file.write_text(f"{process.pid}\n")
    return process


def _wait_until_ready(
    broker: BrokerProcess, process: subprocess.Popen[bytes], timeout: float
) -> None:

    admin = clients.admin_client({**broker.admin_settings, "log_level": 0})
    deadline = time.monotonic() + timeout
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalClusterError(
                f"broker {broker.alias} exited with code {process.returncode} while starting; "
                f"last lines of its log ({broker.directory}):\n{broker.log_tail()}"
            )
        if _port_open(broker.port):
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception as exc:  # KafkaException until the broker is up
                last_error = str(exc)
        time.sleep(0.1)
    raise LocalClusterError(
        f"broker {broker.alias} did not answer a metadata request on {broker.bootstrap} within "
        f"{timeout:.0f}s ({last_error}); last lines of its log:\n{broker.log_tail()}"
    )
