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
) -> dict[str, BrokerProcess]:
    """Start one single-node cluster per alias; clusters already running are kept as they are.

    A cluster whose broker is gone (machine restarted, killed) starts fresh: its old data is
    removed, because its KRaft quorum was formatted for ports that are no longer its own.
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
    for alias in to_start:
        shutil.rmtree(directory / alias, ignore_errors=True)

    overrides = overrides or {}
    clients = clients or {}
    started: dict[str, BrokerProcess] = {}
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, len(to_start))) as pool:
        futures = {
            alias: pool.submit(
                start_broker,
                alias,
                directory / alias,
                overrides.get(alias, {}),
                heap=heap,
                timeout=timeout,
                client=clients.get(alias, {}),
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
