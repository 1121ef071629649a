"""`ferry local nodes|kill|start|link` on the suite's 3-node clusters: what an operator uses to
rehearse a failure, checked against the processes and the brokers' own answers."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import psutil
import pytest

from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.faults.harness import wait_for
from tests.ferry_cli import run_ferry

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]


def _brokers_seen(bootstrap: str) -> set[int]:
    from confluent_kafka.admin import AdminClient

    from ferry.kafka.log import quiet

    metadata = AdminClient(quiet({"bootstrap.servers": bootstrap})).list_topics(timeout=10)
    return set(metadata.brokers)


def test_nodes_lists_every_node(fault_dir: Path, fault_clusters: dict[str, LocalCluster]) -> None:
    result = run_ferry("local", "nodes", "--dir", str(fault_dir / "clusters"), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["cluster"], r["node"]) for r in rows] == [
        (alias, n) for alias in ("A", "B") for n in (1, 2, 3)
    ]
    for row in rows:
        assert row["alive"] is True
        assert row["roles"] == ["broker", "controller"]
        assert psutil.Process(row["pid"]).is_running()
        host, port = row["listener"].split(":")
        with socket.create_connection((host, int(port)), timeout=5):
            pass


def test_kill_and_start_one_node(fault_dir: Path, fault_clusters: dict[str, LocalCluster]) -> None:
    directory = str(fault_dir / "clusters")
    killed = run_ferry("local", "kill", "--cluster", "B", "--node", "3", "--dir", directory)
    assert killed.returncode == 0, killed.stderr
    b = local.read_state(fault_dir / "clusters")["B"]
    assert not b.node(3).is_running()
    assert b.node(1).is_running() and b.node(2).is_running()
    nodes = json.loads(run_ferry("local", "nodes", "--dir", directory, "--json").stdout)
    assert [r["alive"] for r in nodes if r["cluster"] == "B"] == [True, True, False]
    wait_for(lambda: 3 not in _brokers_seen(b.bootstrap), 60, "B's controller fencing node 3")

    started = run_ferry("local", "start", "--cluster", "B", "--node", "3", "--dir", directory)
    assert started.returncode == 0, started.stderr
    assert 3 in _brokers_seen(b.nodes[2].bootstrap)
    wrong = run_ferry("local", "kill", "--cluster", "Q", "--node", "1", "--dir", directory)
    assert wrong.returncode == 1
    assert "no local cluster 'Q'" in wrong.stderr


def test_link_cut_and_restored(fault_dir: Path, fault_clusters: dict[str, LocalCluster]) -> None:
    directory = str(fault_dir / "clusters")
    through_link = fault_clusters["A"].link_bootstrap
    assert _brokers_seen(through_link) == {1, 2, 3}
    cut = run_ferry("local", "link", "--cluster", "A", "cut", "--dir", directory)
    assert cut.returncode == 0, cut.stderr
    assert json.loads(cut.stdout)["mode"] == "cut"
    with pytest.raises(Exception, match=r"(?i)transport|timed out"):
        _brokers_seen(through_link)
    assert _brokers_seen(fault_clusters["A"].bootstrap) == {1, 2, 3}  # the cluster is up
    restored = run_ferry("local", "link", "--cluster", "A", "restore", "--dir", directory)
    assert json.loads(restored.stdout)["mode"] == "open"
    assert _brokers_seen(through_link) == {1, 2, 3}


def test_a_source_behind_a_slow_link_is_measured_and_read_as_across_a_wan(
    fault_dir: Path, fault_clusters: dict[str, LocalCluster]
) -> None:
    """`ferry run` measures each source's round trip and, for one across a wide-area link,
    reads it with the WAN consumer settings: here the link proxy adds 30 ms each way."""
    from ferry.engine.link_settings import WAN_CONSUMER, wan_consumer_settings
    from ferry.kafka.round_trip import round_trip_ms

    directory = str(fault_dir / "clusters")
    through_link = {"bootstrap.servers": fault_clusters["A"].link_bootstrap}
    near = round_trip_ms(through_link, timeout=10)
    assert near is not None and wan_consumer_settings(near, {}) == {}, f"{near} ms"
    slow = run_ferry("local", "link", "--cluster", "A", "delay", "--ms", "30", "--dir", directory)
    assert slow.returncode == 0, slow.stderr
    try:
        far = round_trip_ms(through_link, timeout=10)
    finally:
        restored = run_ferry("local", "link", "--cluster", "A", "restore", "--dir", directory)
        assert restored.returncode == 0, restored.stderr
    assert far is not None and far >= 60, f"a 30 ms each-way link measured {far} ms"
    assert wan_consumer_settings(far, {}) == WAN_CONSUMER


def test_acl_requests_answered_with_the_drawn_controller_killed(
    fault_dir: Path, fault_clusters: dict[str, LocalCluster]
) -> None:
    """librdkafka sends ACL requests to the node its metadata named as controller and waits
    for that node alone; with it killed, ferry's ACL client (a switchover's fence, the
    protection a failover lifts) asks again with fresh metadata: the two live nodes answer."""
    from ferry.config.model import ClusterConfig
    from ferry.kafka.topic_acls import TopicAcls

    directory = fault_dir / "clusters"
    b = local.read_state(directory)["B"]
    acls = TopicAcls(ClusterConfig(alias="B", bootstrap_servers=b.bootstrap), timeout=15)
    drawn = acls.admin.list_topics(timeout=10).controller_id
    local.kill_node(directory, "B", drawn, signal.SIGKILL)
    try:
        # The suite's clusters have no authorizer: the probe ACL refused with
        # SECURITY_DISABLED is a live node's answer (asked once: KafkaUnavailableError,
        # "Failed while waiting for controller", as `ferry failover flow` said).
        assert acls.has_authorizer() is False
    finally:
        local.start_node(directory, "B", drawn)
