"""A pair of secure clusters from `ferry local up --security` (SASL_SSL or mutual TLS, an ACL
authorizer, `User:admin` and ferry's least-privileged `User:ferry`), and what the tests on it
share: each principal's client settings, an MM2-style config file, group offsets.

The pairs are session fixtures (tests/integration/conftest.py): TLS and SCRAM add seconds to
every node's start, so every secure module shares one pair of each kind, with fresh names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.ferry_cli import run_ferry
from tests.integration.group_helpers import commit_group

Settings = dict[str, str]


class SecurePair:
    """Clusters A and B of one `ferry local up --security` run: each principal's settings."""

    def __init__(self, directory: Path, printed: dict[str, Settings]) -> None:
        self.directory = directory
        self.printed = printed
        self.state = json.loads((directory / "clusters.json").read_text())

    def ferry(self, alias: str) -> Settings:
        return dict(self.printed[alias])

    def admin(self, alias: str) -> Settings:
        admin: Settings = self.state[alias]["admin"]
        return dict(admin)

    def admin_only(self, alias: str) -> Settings:
        """The admin's settings without bootstrap.servers (the helpers take it apart)."""
        return {k: v for k, v in self.admin(alias).items() if k != "bootstrap.servers"}

    def bootstrap(self, alias: str) -> str:
        return self.printed[alias]["bootstrap.servers"]


def up(tmp_path_factory: pytest.TempPathFactory, security: str) -> Iterator[SecurePair]:
    directory = tmp_path_factory.mktemp(f"secure-{security}")
    args = ("local", "up", "--clusters", "A,B", "--dir", str(directory), "--json")
    result = run_ferry(*args, "--security", security, timeout=300)
    assert result.returncode == 0, result.stderr
    try:
        yield SecurePair(directory, json.loads(result.stdout))
    finally:
        assert run_ferry("local", "down", "--dir", str(directory)).returncode == 0


def properties(
    directory: Path, clusters: dict[str, Settings], topics: str, **settings: str
) -> Path:
    """An MM2-style file: every cluster key as given, replication factors 1, A->B enabled."""
    lines = ["clusters = A, B"]
    lines += [f"{alias}.{k} = {v}" for alias, s in clusters.items() for k, v in s.items()]
    values = {
        "A->B.enabled": "true",
        "topics": topics,
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "ferry.head.start.enabled": "false",
        "ferry.state.dir": str(directory / "state"),
        **settings,
    }
    lines += [f"{key} = {value}" for key, value in values.items()]
    path = directory / "mm2.properties"
    path.write_text("\n".join(lines) + "\n")
    return path


def commit(settings: Settings, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """`group` committed at `offsets` by a consumer with `settings` (bootstrap included)."""
    commit_group(settings["bootstrap.servers"], group, offsets, settings)


def committed(settings: Settings, group: str, tps: list[tuple[str, int]]) -> dict[Any, int]:
    consumer = Consumer({**settings, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}
