"""`ferry local up/down` against real brokers: addresses that work, and nothing left behind."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ferry.errors import LocalClusterError
from ferry.local.broker import (
    NodePlan,
    _server_properties,
    format_storage,
    start_broker,
)
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, read_all

pytestmark = pytest.mark.integration


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _broker_config(bootstrap: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(30)
    return str(configs[key].value)


def test_local_up_json_gives_working_clusters_and_down_leaves_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "local"
    up = run_ferry(
        "local",
        "up",
        "--clusters",
        "X,Y",
        "--dir",
        str(directory),
        "--json",
        "--set",
        "Y:message.max.bytes=2048",
    )
    assert up.returncode == 0, up.stderr
    addresses = json.loads(up.stdout)
    assert sorted(addresses) == ["X", "Y"]
    state = json.loads((directory / "clusters.json").read_text())
    brokers = [LocalCluster.from_json(alias, entry) for alias, entry in state.items()]
    try:
        for alias, bootstrap in addresses.items():
            assert bootstrap.startswith("127.0.0.1:")
            topic = f"cli-{alias}"
            create_topic(bootstrap, topic)
            sent = [Rec(0, b"k", f"from {alias}".encode(), (("h", b"v"),), RECENT_MS)]
            produce(bootstrap, topic, sent)
            assert read_all(bootstrap, topic, 1, 1) == sent
        # Overrides reach one cluster only.
        assert _broker_config(addresses["Y"], "message.max.bytes") == "2048"
        assert _broker_config(addresses["X"], "message.max.bytes") != "2048"
        # A second `up` keeps the running clusters instead of starting more.
        again = run_ferry("local", "up", "--clusters", "X,Y", "--dir", str(directory), "--json")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == addresses
    finally:
        down = run_ferry("local", "down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert "stopped: X, Y" in down.stdout
    for broker in brokers:
        assert not broker.is_running()
        assert not _listening(broker.port)
        assert not _listening(broker.controller_port)
    assert not directory.exists()


def test_a_broker_that_cannot_start_reports_its_log(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{{controller_port}}"
        with pytest.raises(LocalClusterError) as info:
            start_broker(
                "Z",
                tmp_path / "z",
                {"listeners": listeners, "advertised.listeners": listeners},
                timeout=60,
            )
    message = str(info.value)
    assert "broker Z" in message
    assert "Address already in use" in message or "BindException" in message


def test_bad_broker_setting_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = run_ferry(
        "local", "up", "--clusters", "A", "--dir", str(tmp_path), "--set", "Q:num.partitions=3"
    )
    assert result.returncode == 1
    assert "names cluster 'Q', which is not one of A" in result.stderr
    assert not (tmp_path / "clusters.json").exists()


def test_a_cluster_id_starting_with_a_dash_formats(tmp_path: Path) -> None:
    # One random id in 64 starts with '-'; Kafka's argparse read it as an option (seen in CI).
    cluster_id = base64.urlsafe_b64encode(b"\xf8" + bytes(15)).decode().rstrip("=")
    assert cluster_id.startswith("-")
    properties = tmp_path / "server.properties"
    props = _server_properties(tmp_path, NodePlan(1, "broker,controller", 9, 10), {}, None)
    properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    format_storage("A", tmp_path, properties, cluster_id, ["--standalone"])
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}" in meta
