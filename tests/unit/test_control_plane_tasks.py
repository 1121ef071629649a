"""Which periodic tasks `ferry run` starts per flow: each only when enabled with an interval."""

from __future__ import annotations

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.control_plane import ControlPlane


def plane(**settings: object) -> ControlPlane:
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    flow = FlowConfig(
        source="A", target="B", enabled=True, emit_checkpoints_enabled=False, **settings
    )
    return ControlPlane(FerryConfig(clusters=clusters, flows=(flow,)))


def test_heartbeats_and_topic_configs_by_default() -> None:
    p = plane()
    try:
        assert p.tasks == ["A->B heartbeats", "A->B topic configs"]
    finally:
        p.stop()


def test_each_task_off_by_its_flag_or_a_zero_interval() -> None:
    for settings, left in [
        ({"emit_heartbeats_enabled": False}, ["A->B topic configs"]),
        ({"emit_heartbeats_interval_seconds": 0}, ["A->B topic configs"]),
        ({"sync_topic_configs_enabled": False}, ["A->B heartbeats"]),
        ({"sync_topic_configs_interval_seconds": 0}, ["A->B heartbeats"]),
    ]:
        p = plane(**settings)
        try:
            assert p.tasks == left, settings
        finally:
            p.stop()
