"""`ferry local up/down`: several independent local clusters, remembered in a state file.

The state file (`DIR/clusters.json`) is the only record of what `up` started; `down` stops
exactly those pids, so it never touches a broker some other tool or test started.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ferry.errors import LocalClusterError
from ferry.local.broker import BrokerProcess, start_broker
from ferry.local.security import ClusterSecurity, SecurityMode, grant_ferry_acls, prepare

__all__ = ["default_dir", "down", "parse_cluster_settings", "read_state", "up"]

STATE_FILE = "clusters.json"


def default_dir() -> Path:
    return Path(os.environ.get("FERRY_LOCAL_DIR", ".ferry-local"))


def read_state(directory: Path) -> dict[str, BrokerProcess]:
    path = directory / STATE_FILE
    if not path.exists():
        return {}
    try:
        raw = json.loads(path.read_text())
        return {alias: BrokerProcess(**entry) for alias, entry in raw.items()}
    except (ValueError, TypeError) as exc:
        raise LocalClusterError(f"{path} is not a ferry local state file: {exc}") from exc


def _write_state(directory: Path, brokers: Mapping[str, BrokerProcess]) -> None:
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
    heap: str = "512m",
    timeout: float = 90.0,
    clients: Mapping[str, Mapping[str, str]] | None = None,
    security: SecurityMode = "plaintext",
) -> dict[str, BrokerProcess]:
    """Start one single-node cluster per alias; clusters already running are kept as they are.

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
    running = {a: b for a, b in state.items() if b.is_running()}
    to_start = [a for a in aliases if a not in running]
    for alias in aliases:
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
    started: dict[str, BrokerProcess] = {}
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
            )
            for alias in to_start
        }
        for alias, future in futures.items():
            try:
                started[alias] = future.result()
            except LocalClusterError as exc:
                errors.append(str(exc))
    if errors:
        for broker in started.values():
            broker.stop()
        _write_state(directory, running)
        raise LocalClusterError("\n\n".join(errors))
    result = {**running, **started}
    _write_state(directory, result)
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
) -> BrokerProcess:
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
    return broker


def down(directory: Path | None = None, *, keep_data: bool = False) -> list[str]:
    """Stop every broker `up` started in `directory`; returns the aliases stopped."""
    directory = (directory or default_dir()).resolve()
    state = read_state(directory)
    stopped = []
    for alias, broker in state.items():
        if broker.is_running():
            broker.stop()
            stopped.append(alias)
        if not keep_data:
            shutil.rmtree(directory / alias, ignore_errors=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    if not keep_data and directory.exists() and not any(directory.iterdir()):
        directory.rmdir()
    return stopped
