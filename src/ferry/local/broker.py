"""One real single-node KRaft Kafka cluster (broker and controller in one JVM) on 127.0.0.1.

The broker runs in its own session so it outlives `ferry local up`, and is stopped by the pid
recorded at start, never by name. Its pid file also records the server.properties path, so a
recycled pid that now belongs to another process is never signalled.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from ferry.errors import LocalClusterError
from ferry.kafka import clients
from ferry.local.distribution import kafka_classpath

__all__ = ["BrokerProcess", "free_port", "restart_broker", "start_broker"]

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


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

    def is_running(self) -> bool:
        """True while the recorded pid is still this broker (not a recycled pid)."""
        try:
            process = psutil.Process(self.pid)
            # A zombie has exited and only waits for its parent to reap it.
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            cmdline = process.cmdline()
        except psutil.Error:
            return False
        return any(str(self.properties_file) in arg for arg in cmdline)

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
        self._signal_until_gone(signal.SIGTERM, timeout)
        if self.is_running():
            self._signal_until_gone(signal.SIGKILL, 10.0)
        if self.is_running():
            raise LocalClusterError(f"broker {self.alias} (pid {self.pid}) did not stop")
        self._wait_ports_closed(10.0)

    def kill(self) -> None:
        """SIGKILL, as a crash would: for fault tests."""
        self._signal_until_gone(signal.SIGKILL, 10.0)
        self._wait_ports_closed(10.0)

    def _signal_until_gone(self, sig: signal.Signals, timeout: float) -> None:
        if not self.is_running():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)
        deadline = time.monotonic() + timeout
        while self.is_running() and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(self.pid, os.WNOHANG)  # reap it when it is our own child
            time.sleep(0.05)

    def _wait_ports_closed(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _port_open(self.port) and not _port_open(self.controller_port):
                return
            time.sleep(0.05)
        raise LocalClusterError(
            f"broker {self.alias} stopped but port {self.port} or {self.controller_port} "
            "still accepts connections"
        )


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _server_properties(
    directory: Path, port: int, controller_port: int, overrides: Mapping[str, str]
) -> dict[str, str]:
    props = dict(_DEFAULTS)
    props.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": (
                f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
            ),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
            "log.dirs": str(directory / "data"),
        }
    )
    # Overrides may refer to the ports chosen here, e.g. a SASL listener on {port}.
    for key, value in overrides.items():
        props[key] = value.format(port=port, controller_port=controller_port)
    return props


def _java_command(directory: Path, main: str, *args: str, heap: str) -> list[str]:
    return [
        "java",
        f"-Xmx{heap}",
        "-Xms128m",
        "-XX:+UseG1GC",
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
    """Format storage, start the JVM and wait until the broker answers a metadata request
    from a client configured with `admin` or else `client` (librdkafka settings, e.g. SASL
    credentials). `format_args` go to Kafka's storage tool (e.g. SCRAM users)."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    while controller_port == port:
        controller_port = free_port()
    props = _server_properties(directory, port, controller_port, overrides or {})
    properties_file = directory / "server.properties"
    properties_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (directory / "log4j2.properties").write_text(_LOG4J2.format(log=directory / "broker.log"))

    if not (directory / "data" / "meta.properties").exists():
        format_storage(alias, directory, properties_file, _cluster_id(), format_args)

    broker = BrokerProcess(
        alias,
        0,
        port,
        controller_port,
        str(directory),
        dict(overrides or {}),
        # bootstrap.servers first, so `clusters.json` holds every setting a client needs.
        {"bootstrap.servers": f"127.0.0.1:{port}", **(client or {})},
        {"bootstrap.servers": f"127.0.0.1:{port}", **admin} if admin else {},
        security,
    )
    _launch(broker, heap=heap, timeout=timeout)
    return broker


def format_storage(
    alias: str,
    directory: Path,
    properties_file: Path,
    cluster_id: str,
    extra_args: Sequence[str] = (),
) -> None:
    """Format a KRaft log directory as a standalone broker+controller of `cluster_id`."""
    fmt = subprocess.run(
        _java_command(
            directory,
            "kafka.tools.StorageTool",
            "format",
            # `=` form: a random id may start with '-', which argparse would take for an option.
            f"--cluster-id={cluster_id}",
            f"--config={properties_file}",
            "--standalone",
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
    try:
        _wait_until_ready(broker, process, timeout)
    except LocalClusterError:
        broker.kill()
        raise


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
