"""A local cluster's shape, written before any node starts: quorum, listeners, replication."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local import broker
from ferry.local.broker import NodePlan, _server_properties
from ferry.local.cluster import LocalCluster, replication_settings


def test_three_nodes_replicate_three_times_and_need_two_in_sync() -> None:
    settings = replication_settings(3)
    assert settings["default.replication.factor"] == "3"
    assert settings["min.insync.replicas"] == "2"
    assert settings["transaction.state.log.min.isr"] == "2"
    assert settings["offsets.topic.replication.factor"] == "3"
    # More nodes do not raise the factor beyond 3; fewer lower it, and one node down must
    # not stop a two-node cluster's writes.
    assert replication_settings(5)["default.replication.factor"] == "3"
    assert replication_settings(2)["default.replication.factor"] == "2"
    assert replication_settings(2)["min.insync.replicas"] == "1"
    assert replication_settings(1)["transaction.state.log.replication.factor"] == "1"


def test_a_node_behind_a_link_advertises_the_proxy_on_its_link_listener(tmp_path: Path) -> None:
    plan = NodePlan(2, "broker,controller", 9092, 9093, link_port=9094, proxy_port=19094)
    props = _server_properties(tmp_path, plan, {}, "1@127.0.0.1:1,2@127.0.0.1:9093")
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:1,2@127.0.0.1:9093"
    assert "controller.quorum.bootstrap.servers" not in props
    assert "LINK://127.0.0.1:9094" in props["listeners"]
    assert "LINK://127.0.0.1:19094" in props["advertised.listeners"]
    assert "LINK://127.0.0.1:9094" not in props["advertised.listeners"]
    assert "LINK:PLAINTEXT" in props["listener.security.protocol.map"]


def test_a_broker_only_node_has_no_controller_listener(tmp_path: Path) -> None:
    plan = NodePlan(4, "broker", 9092, 0)
    props = _server_properties(tmp_path, plan, {}, "1@127.0.0.1:1")
    assert props["process.roles"] == "broker"
    assert "CONTROLLER://" not in props["listeners"]


def test_a_state_file_of_single_brokers_still_reads() -> None:
    # clusters.json as ferry wrote it before clusters had nodes.
    legacy = {
        "alias": "A",
        "pid": 12,
        "port": 9092,
        "controller_port": 9093,
        "directory": "/tmp/a",
    }
    cluster = LocalCluster.from_json("A", legacy)
    assert [n.node_id for n in cluster.nodes] == [1]
    assert cluster.bootstrap == "127.0.0.1:9092"
    round_trip = LocalCluster.from_json("A", cluster.to_json())
    assert round_trip == cluster


def test_no_two_nodes_planned_in_one_process_share_a_port(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ports are only checked free, not held, until each node binds them; with a range of
    # five ports, six nodes' worth of draws must never repeat one and then run out loudly.
    monkeypatch.setattr(broker, "_HANDED_OUT", set())
    monkeypatch.setattr(broker, "_ephemeral_range", lambda: (10_005, 60_999))
    plans = [NodePlan.pick(1, "broker,controller"), NodePlan.pick(2, "broker,controller")]
    ports = [plan.port for plan in plans] + [plan.controller_port for plan in plans]
    ports.append(broker.free_port())
    assert sorted(ports) == list(range(10_000, 10_005))
    with pytest.raises(LocalClusterError, match="no free port"):
        broker.free_port()
