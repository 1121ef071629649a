"""Which periodic tasks `ferry run` starts per flow: each only when enabled with an interval."""

from __future__ import annotations

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.sync.loop import SyncLoop

ALL = [
    "A->B heartbeats",
    "A->B topic ACLs",
    "A->B remote topic protection",
    "A->B topic configs",
    "A->B checkpoints",
    "A->B consumer timestamps",
]


def plane(**settings: object) -> SyncLoop:
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    flow = FlowConfig(source="A", target="B", enabled=True, **settings)
    return SyncLoop(FerryConfig(clusters=clusters, flows=(flow,)))


def test_mm2s_defaults_start_every_task_but_group_sync() -> None:
    p = plane()
    try:
        assert p.tasks == ALL
    finally:
        p.stop()


def test_group_sync_when_enabled() -> None:
    p = plane(sync_group_offsets_enabled=True)
    try:
        assert p.tasks == [*ALL, "A->B group offset sync"]
    finally:
        p.stop()


@pytest.mark.parametrize(
    ("flag", "interval", "gone"),
    [
        ("emit_heartbeats_enabled", "emit_heartbeats_interval_seconds", ["A->B heartbeats"]),
        ("sync_topic_acls_enabled", "sync_topic_acls_interval_seconds", ["A->B topic ACLs"]),
        (
            "sync_topic_configs_enabled",
            "sync_topic_configs_interval_seconds",
            ["A->B topic configs"],
        ),
        (
            "emit_checkpoints_enabled",
            "emit_checkpoints_interval_seconds",
            ["A->B checkpoints", "A->B consumer timestamps"],
        ),
    ],
)
def test_each_task_off_by_its_flag_or_a_zero_interval(
    flag: str, interval: str, gone: list[str]
) -> None:
    for settings in ({flag: False}, {interval: 0}):
        p = plane(**settings)
        try:
            assert p.tasks == [t for t in ALL if t not in gone], settings
        finally:
            p.stop()


def test_remote_topic_protection_off_by_its_flag() -> None:
    p = plane(protect_remote_topics=False)
    try:
        assert p.tasks == [t for t in ALL if t != "A->B remote topic protection"]
    finally:
        p.stop()
