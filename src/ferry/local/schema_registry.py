"""A local schema registry per cluster: Apicurio Registry, fetched from Maven Central, by pid.

`ferry local up --schema-registry` starts one beside each cluster. Apicurio Registry 2.6 is a
Quarkus runner jar (Java 17; the 3.x line needs Java 21) whose in-memory storage starts empty
and whose Confluent-compatible API (`/apis/ccompat/v7`) is what confluent-kafka's
`schema_registry` client, and so ferry, talks to. The release is one `tar.gz` on Maven Central
(classifier `all`), downloaded and checked against the package's jar lock (local/maven.py) into
the per-user cache, unpacked and marked complete, so an interrupted download is never taken as
whole.

Each registry keeps its schemas in an H2 database file in its own directory (Apicurio's default
is an in-memory one), so a registry stopped and started again (`restart_registry`) still has
every schema under the ids it gave, as a real registry's storage does: a restarted registry
that came back empty would make the ids in every record already written name nothing.

Registries live in their own state file (`DIR/registries.json`) beside `clusters.json`:
`ferry local down` stops exactly the pids recorded there, after checking each pid is still that
registry (its command line names the runner jar and its port), never a recycled pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from ferry.errors import LocalClusterError
from ferry.local.broker import free_port, java_executable
from ferry.local.maven import COMPLETE_MARK, download_files, exclusive, is_complete
from ferry.local.processes import command_line, live_process, stop_process

__all__ = [
    "APICURIO_ARTIFACT",
    "APICURIO_VERSION",
    "CCOMPAT_PATH",
    "STATE_FILE",
    "RegistryProcess",
    "apicurio_bundle",
    "ensure_apicurio",
    "read_registries",
    "restart_registry",
    "start_registries",
    "stop_registries",
]

APICURIO_VERSION = "2.6.13.Final"
APICURIO_ARTIFACT = f"io.apicurio:apicurio-registry-app:tar.gz:all:{APICURIO_VERSION}"
_RUNNER = f"apicurio-registry-app-{APICURIO_VERSION}-runner.jar"
CCOMPAT_PATH = "/apis/ccompat/v7"
STATE_FILE = "registries.json"
# Measured: about 210 MB resident with the default heap; 256 MiB holds a test's schemas.
DEFAULT_HEAP = "256m"


def apicurio_home() -> Path:
    """Where the release lives: $FERRY_APICURIO_HOME, or the per-user cache."""
    override = os.environ.get("FERRY_APICURIO_HOME")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "ferry" / f"apicurio-registry-{APICURIO_VERSION}"


def ensure_apicurio(*, quiet: bool = True) -> Path:
    """Fetch and unpack the pinned release once; later calls only check the completion mark."""
    home = apicurio_home()
    if is_complete(home):
        return home
    with exclusive(home):  # a registry per cluster starts side by side on an empty cache
        if is_complete(home):
            return home
        staging = Path(tempfile.mkdtemp(prefix="fetch-", dir=home))
        try:
            download_files(
                apicurio_bundle(),
                staging,
                f"Apicurio Registry {APICURIO_VERSION}",
                home,
                quiet=quiet,
            )
            archives = list(staging.glob("*.tar.gz"))
            if len(archives) != 1:
                raise LocalClusterError(
                    f"no {APICURIO_ARTIFACT} archive was downloaded into {staging}"
                )
            unpacked = staging / "app"
            with tarfile.open(archives[0]) as archive:
                archive.extractall(unpacked, filter="data")
            if not (unpacked / _RUNNER).exists():
                raise LocalClusterError(f"{archives[0].name} holds no {_RUNNER}")
            app = home / "app"
            shutil.rmtree(app, ignore_errors=True)
            unpacked.rename(app)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        (home / COMPLETE_MARK).write_text(APICURIO_VERSION + "\n")
    return home


def apicurio_bundle() -> str:
    """The release's name in the jar lock."""
    return f"apicurio-registry-{APICURIO_VERSION}"


@dataclass
class RegistryProcess:
    """A started registry: the cluster it serves, where it listens, which process it is."""

    alias: str
    pid: int
    port: int
    directory: str

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what `A.schema.registry.url` names."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    @property
    def log_file(self) -> Path:
        return Path(self.directory) / "registry.log"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "url": self.url}

    @staticmethod
    def from_json(raw: Mapping[str, object]) -> RegistryProcess:
        return RegistryProcess(
            alias=str(raw["alias"]),
            pid=int(raw["pid"]),  # type: ignore[call-overload]  # written by to_json
            port=int(raw["port"]),  # type: ignore[call-overload]
            directory=str(raw["directory"]),
        )

    def is_running(self) -> bool:
        """True while the pid is still this registry (not a pid the kernel gave another)."""
        try:
            process = psutil.Process(self.pid)
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            cmdline = command_line(process)
            environ_port = process.environ().get("QUARKUS_HTTP_PORT")
        except psutil.Error:
            return False
        return any(_RUNNER in arg for arg in cmdline) and environ_port == str(self.port)

    def log_tail(self, lines: int = 15) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, SIGKILL if it has not exited within `timeout`."""
        process = live_process(self.pid) if self.is_running() else None
        stop_process(process, f"schema registry of {self.alias}", timeout)


def read_registries(directory: Path) -> dict[str, RegistryProcess]:
    path = directory / STATE_FILE
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {alias: RegistryProcess.from_json(entry) for alias, entry in raw.items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise LocalClusterError(f"{path} is not a ferry local registry file: {exc}") from exc


def _write_registries(directory: Path, registries: Mapping[str, RegistryProcess]) -> None:
    path = directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({a: r.to_json() for a, r in registries.items()}, indent=2) + "\n")
    tmp.replace(path)


def start_registries(
    aliases: Iterable[str], directory: Path, *, timeout: float = 120.0, heap: str = DEFAULT_HEAP
) -> dict[str, RegistryProcess]:
    """One registry per alias (a running one is kept), all started at once, each waited for
    until its Confluent-compatible API answers; recorded in `DIR/registries.json`."""
    home = ensure_apicurio()
    known = read_registries(directory)
    running = {a: r for a, r in known.items() if r.is_running()}
    starting: dict[str, tuple[RegistryProcess, subprocess.Popen[bytes]]] = {}
    for alias in aliases:
        if alias in running:
            continue
        where = directory / f"{alias}-registry"
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        registry = RegistryProcess(alias, 0, free_port(), str(where))
        starting[alias] = (registry, _launch(registry, home, heap))
    try:
        for registry, process in starting.values():
            _wait_until_ready(registry, process, timeout)
    except LocalClusterError:
        for registry, _ in starting.values():
            with contextlib.suppress(LocalClusterError):
                registry.stop(5.0)
        _write_registries(directory, running)
        raise
    result = {**running, **{alias: r for alias, (r, _) in starting.items()}}
    _write_registries(directory, result)
    return result


def restart_registry(
    directory: Path, alias: str, *, timeout: float = 120.0, heap: str = DEFAULT_HEAP
) -> RegistryProcess:
    """Start `alias`'s registry again (it is stopped first if it runs), on its port and over
    its database file, so it serves the schemas and ids it had; recorded under its new pid."""
    known = read_registries(directory)
    if alias not in known:
        raise LocalClusterError(f"no schema registry of {alias} is recorded in {directory}")
    registry = known[alias]
    registry.stop()
    process = _launch(registry, ensure_apicurio(), heap)
    try:
        _wait_until_ready(registry, process, timeout)
    except LocalClusterError:
        with contextlib.suppress(LocalClusterError):
            registry.stop(5.0)
        raise
    _write_registries(directory, {**known, alias: registry})
    return registry


def stop_registries(directory: Path) -> list[str]:
    """Stop every registry recorded in `directory`; returns the aliases stopped."""
    stopped = []
    for alias, registry in read_registries(directory).items():
        if registry.is_running():
            registry.stop()
            stopped.append(alias)
        shutil.rmtree(registry.directory, ignore_errors=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    return stopped


def _launch(registry: RegistryProcess, home: Path, heap: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "QUARKUS_HTTP_HOST": "127.0.0.1",
        "QUARKUS_HTTP_PORT": str(registry.port),
        # Its own file of logs, not the terminal that ran `ferry local up`.
        "QUARKUS_LOG_CONSOLE_COLOR": "false",
        # Schemas kept on disk, in its directory: a restart keeps them and their ids.
        "REGISTRY_DATASOURCE_URL": f"jdbc:h2:file:{Path(registry.directory) / 'registry'}",
    }
    with registry.log_file.open("ab") as out:
        process = subprocess.Popen(
            [java_executable(), f"-Xmx{heap}", "-jar", str(home / "app" / _RUNNER)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=registry.directory,
            env=env,
            start_new_session=True,  # survives the CLI that started it, and its Ctrl-C
        )
    registry.pid = process.pid
    return process


def _wait_until_ready(
    registry: RegistryProcess, process: subprocess.Popen[bytes], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise LocalClusterError(
                f"schema registry of {registry.alias} exited with code {process.returncode} "
                f"while starting; last lines of its log ({registry.log_file}):\n"
                f"{registry.log_tail()}"
            )
        try:
            with urllib.request.urlopen(f"{registry.url}/subjects", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.2)
    raise LocalClusterError(
        f"schema registry of {registry.alias} did not answer on {registry.url} within "
        f"{timeout:.0f}s ({last}); last lines of its log:\n{registry.log_tail()}"
    )
