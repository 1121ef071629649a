"""`ferry local up/down`: several independent local clusters, remembered in a state file.

Each cluster has one node (the default) or more (`ferry.local.cluster`); `nodes` lists them and
`kill`/`start` end and start one node, for fault tests and for rehearsing failures.

The state file (`DIR/clusters.json`) is the only record of what `up` started; `down` stops
exactly those pids, so it never touches a broker some other tool or test started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ferry.errors import LocalClusterError
from ferry.local.broker import free_port, start_broker
from ferry.local.cluster import LocalCluster, start_cluster
from ferry.local.security import ClusterSecurity, SecurityMode, grant_ferry_acls, prepare

__all__ = [
    "DEFAULT_HEAP",
    "default_dir",
    "down",
    "kill_node",
    "link_command",
    "parse_cluster_settings",
    "read_state",
    "start_node",
    "up",
    "write_state",
]

# A node's JVM heap. 1 GiB holds about 10,000 partition replicas (1,000 topics x 10 partitions
# at replication factor 3 on 3 nodes) with room for a copy's traffic; 512 MiB ran out of heap
# there. The JVM starts at 128 MiB and grows only as the node needs it.
DEFAULT_HEAP = "1g"

STATE_FILE = "clusters.json"


def default_dir() -> Path:
    return Path(os.environ.get("FERRY_LOCAL_DIR", ".ferry-local"))


def read_state(directory: Path) -> dict[str, LocalCluster]:
    path = directory / STATE_FILE
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {alias: LocalCluster.from_json(alias, entry) for alias, entry in raw.items()}
    except (ValueError, TypeError, KeyError) as exc:
        raise LocalClusterError(f"{path} is not a ferry local state file: {exc}") from exc


def write_state(directory: Path, brokers: Mapping[str, LocalCluster]) -> None:
    path = directory / STATE_FILE
    tmp = path.with_suffix(".tmp")
    # Secure clusters' passwords are in it: readable by their owner only.
    tmp.touch(mode=0o600)
    tmp.chmod(0o600)
    tmp.write_text(json.dumps({a: b.to_json() for a, b in brokers.items()}, indent=2) + "\n")
    tmp.replace(path)


def parse_cluster_settings(
    settings: Iterable[str], aliases: Iterable[str], what: str = "broker setting"
) -> dict[str, dict[str, str]]:
    """`KEY=VALUE` applies to every cluster, `ALIAS:KEY=VALUE` to one."""
    aliases = list(aliases)
    overrides: dict[str, dict[str, str]] = {alias: {} for alias in aliases}
    for setting in settings:
        target, sep, assignment = setting.partition(":")
        if not sep or "=" in target:
            target, assignment = "", setting
        key, eq, value = assignment.partition("=")
        if not eq or not key.strip():
            raise LocalClusterError(f"{what} '{setting}' is not KEY=VALUE or ALIAS:KEY=VALUE")
        if target and target not in overrides:
            raise LocalClusterError(
                f"{what} '{setting}' names cluster '{target}', "
                f"which is not one of {', '.join(aliases)}"
            )
        for alias in [target] if target else aliases:
            overrides[alias][key.strip()] = value.strip()
    return overrides


def up(
    aliases: Iterable[str],
    directory: Path | None = None,
    overrides: Mapping[str, Mapping[str, str]] | None = None,
    *,
    heap: str = DEFAULT_HEAP,
    timeout: float = 90.0,
    clients: Mapping[str, Mapping[str, str]] | None = None,
    security: SecurityMode = "plaintext",
    brokers: int = 1,
    link: bool = False,
) -> dict[str, LocalCluster]:
    """Start one cluster of `brokers` nodes per alias; clusters with a node still running are
    kept as they are (a fault test may have killed the others). `link` puts a link proxy in
    front of each new cluster (`LocalCluster.link_bootstrap`).

    A cluster whose broker is gone (machine restarted, killed) starts fresh: its old data is
    removed, because its KRaft quorum was formatted for ports that are no longer its own.
    With `security` other than plaintext each new cluster gets TLS listeners, its users and
    an ACL authorizer (`ferry.local.security`); `overrides` and `clients` still apply on top.
    A running cluster started with another security mode is refused, not silently kept.
    """
    aliases = list(dict.fromkeys(aliases))
    if not aliases:
        raise LocalClusterError("no cluster aliases given")
    for alias in aliases:
        if not alias or not alias.replace("_", "").replace("-", "").isalnum():
            raise LocalClusterError(f"cluster alias '{alias}' must be letters, digits, '-' or '_'")
    directory = (directory or default_dir()).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    state = read_state(directory)
    if brokers < 1:
        raise LocalClusterError(f"--brokers must be at least 1, not {brokers}")
    if security != "plaintext" and (brokers > 1 or link):
        raise LocalClusterError(
            f"--security {security} runs single-node clusters only; "
            "--brokers above 1 and --link-proxy are plaintext"
        )
    running = {a: c for a, c in state.items() if c.any_running()}
    to_start = [a for a in aliases if a not in running]
    for alias in aliases:
        if alias in running and len(running[alias].nodes) != brokers:
            raise LocalClusterError(
                f"cluster {alias} in {directory} already runs with {len(running[alias].nodes)} "
                f"node(s), not {brokers}; stop it first (ferry local down --dir {directory})"
            )
        if alias in running and running[alias].security != security:
            raise LocalClusterError(
                f"cluster {alias} in {directory} already runs with security "
                f"{running[alias].security}, not {security}; stop it first "
                f"(ferry local down --dir {directory})"
            )
    for alias in to_start:
        shutil.rmtree(directory / alias, ignore_errors=True)

    overrides = overrides or {}
    clients = clients or {}
    secured = {alias: prepare(security, alias, directory) for alias in to_start}
    started: dict[str, LocalCluster] = {}
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, len(to_start))) as pool:
        futures = {
            alias: pool.submit(
                _start,
                alias,
                directory / alias,
                secured[alias],
                overrides.get(alias, {}),
                clients.get(alias, {}),
                heap=heap,
                timeout=timeout,
                brokers=brokers,
                link=link,
            )
            for alias in to_start
        }
        for alias, future in futures.items():
            try:
                started[alias] = future.result()
            except LocalClusterError as exc:
                errors.append(str(exc))
    if errors:
        for cluster in started.values():
            cluster.stop()
            _stop_link(cluster)
        write_state(directory, running)
        raise LocalClusterError("\n\n".join(errors))
    result = {**running, **started}
    write_state(directory, result)
    return {alias: result[alias] for alias in aliases}


def _start(
    alias: str,
    directory: Path,
    security: ClusterSecurity,
    overrides: Mapping[str, str],
    client: Mapping[str, str],
    *,
    heap: str,
    timeout: float,
    brokers: int,
    link: bool,
) -> LocalCluster:
    if brokers > 1 or link:
        cluster = start_cluster(
            alias,
            directory,
            brokers,
            overrides,
            heap=heap,
            timeout=timeout,
            link=link,
            client=client,
        )
        if link:
            cluster.link = _start_link(cluster, directory)
        return cluster
    broker = start_broker(
        alias,
        directory,
        {**security.broker, **overrides},
        heap=heap,
        timeout=timeout,
        client={**security.ferry, **client},
        admin=security.admin,
        security=security.mode,
        format_args=security.format_args,
    )
    if security.mode != "plaintext":
        try:
            grant_ferry_acls(broker.bootstrap, security.admin, timeout)
        except Exception as exc:  # KafkaException: the broker answered but refused
            broker.stop()
            raise LocalClusterError(
                f"cluster {alias} started but granting ferry's ACLs failed: {exc}; "
                f"last lines of its log ({directory}):\n{broker.log_tail()}"
            ) from exc
    return LocalCluster(alias, [broker])


def down(directory: Path | None = None, *, keep_data: bool = False) -> list[str]:
    """Stop every broker `up` started in `directory`, and the schema registries started beside
    them (`ferry.local.schema_registry`); returns the aliases stopped."""
    from ferry.local.schema_registry import stop_registries

    directory = (directory or default_dir()).resolve()
    state = read_state(directory)
    stopped = []
    registries = stop_registries(directory) if directory.exists() else []
    for alias, cluster in state.items():
        if cluster.any_running():
            cluster.stop()
            stopped.append(alias)
        _stop_link(cluster)
        if not keep_data:
            shutil.rmtree(directory / alias, ignore_errors=True)
    stopped += [f"{alias} schema registry" for alias in registries]
    (directory / STATE_FILE).unlink(missing_ok=True)
    if not keep_data and directory.exists() and not any(directory.iterdir()):
        directory.rmdir()
    return stopped


def _start_link(cluster: LocalCluster, directory: Path) -> dict[str, object]:
    """A link proxy process in front of every node: proxy port -> the node's LINK listener."""
    from ferry.local.link_proxy import start_link_process

    routes = {node.proxy_port: node.link_port for node in cluster.nodes}
    handle = start_link_process(routes, free_port(), directory / "link")
    return handle.to_json()


def _stop_link(cluster: LocalCluster) -> None:
    if cluster.link:
        from ferry.local.link_proxy import LinkProcessHandle

        LinkProcessHandle.from_json(cluster.link).stop()


def _cluster(directory: Path | None, alias: str) -> tuple[Path, dict[str, LocalCluster]]:
    directory = (directory or default_dir()).resolve()
    state = read_state(directory)
    if alias not in state:
        known = ", ".join(state) or "none"
        raise LocalClusterError(
            f"no local cluster '{alias}' in {directory} (clusters there: {known})"
        )
    return directory, state


def kill_node(directory: Path | None, alias: str, node_id: int, sig: signal.Signals) -> None:
    """Signal one node of a cluster (KILL, TERM, STOP, CONT), for fault tests and rehearsals."""
    _, state = _cluster(directory, alias)
    state[alias].signal_node(node_id, sig)


def start_node(
    directory: Path | None,
    alias: str,
    node_id: int,
    *,
    heap: str = DEFAULT_HEAP,
    timeout: float = 240.0,
) -> LocalCluster:
    """Start a killed or stopped node again on its ports and data, and remember its new pid."""
    directory, state = _cluster(directory, alias)
    state[alias].start_node(node_id, heap=heap, timeout=timeout)
    write_state(directory, state)
    return state[alias]


def link_command(
    directory: Path | None, alias: str, command: str, delay_ms: float | None = None
) -> dict[str, object]:
    """Send `command` (open, cut, blackhole, restore, status) to the cluster's link proxy."""
    from ferry.local.link_proxy import LinkProcessHandle

    directory, state = _cluster(directory, alias)
    cluster = state[alias]
    if not cluster.link:
        raise LocalClusterError(
            f"cluster {alias} in {directory} has no link proxy; start it with "
            "ferry local up --link-proxy"
        )
    return LinkProcessHandle.from_json(cluster.link).command(command, delay_ms)
