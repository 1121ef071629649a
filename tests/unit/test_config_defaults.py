"""What a config means when it says little: MM2 4.1.1's defaults, and how overrides layer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from ferry.config import Entry, FlowConfig, load_config, parse_entries
from ferry.policy import policy_for

MINIMAL = "clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"


def test_a_minimal_file_gets_mirrormaker_defaults(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(MINIMAL)
    cfg = load_config(tmp_path / "mm2.properties")
    assert [flow.name for flow in cfg.flows] == ["A->B", "B->A"]
    assert cfg.enabled_flows == ()
    flow = cfg.flow("A", "B")
    assert flow == FlowConfig(source="A", target="B")
    assert flow.topics == (".*",)
    assert flow.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert flow.emit_checkpoints_interval_seconds == 60
    assert flow.emit_heartbeats_interval_seconds == 1
    assert not flow.sync_group_offsets_enabled
    assert flow.policy.kind == "prefix" and flow.policy.separator == "."
    assert not flow.exactly_once and flow.replication_factor == 2
    assert cfg.state_dir == tmp_path / "ferry-state"
    assert cfg.spark == {} and cfg.ignored_keys == ()


def test_default_excludes_keep_internal_and_replica_topics_home() -> None:
    excluded = FlowConfig(source="A", target="B").topics_exclude
    for topic in ("mm2-offset-syncs.B.internal", "orders.replica", "__consumer_offsets"):
        assert any(re.fullmatch(p, topic) for p in excluded), topic
    for topic in ("orders", "A.internal-ish", "payments-internal"):
        assert not any(re.fullmatch(p, topic) for p in excluded), topic


def test_per_flow_settings_override_file_wide_ones_for_that_flow_only(tmp_path: Path) -> None:
    cfg = parse_entries(
        [
            Entry("clusters", "A, B, C", 1),
            *(Entry(f"{a}.bootstrap.servers", "h:1", 2) for a in "ABC"),
            Entry("topics", "orders.*", 3),
            Entry("C->A.topics", "audit", 4),
            Entry("C->A.enabled", "true", 5),
            Entry("emit.checkpoints.interval.seconds", "5", 6),
        ],
        base_dir=tmp_path,
    )
    assert len(cfg.flows) == 6
    assert [f.name for f in cfg.enabled_flows] == ["C->A"]
    assert cfg.flow("C", "A").topics == ("audit",)
    assert cfg.flow("A", "B").topics == ("orders.*",)
    assert all(flow.emit_checkpoints_interval_seconds == 5 for flow in cfg.flows)


def test_a_negative_interval_turns_the_task_off_as_in_mm2(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(
        MINIMAL
        + "emit.heartbeats.interval.seconds = -1\nA->B.emit.checkpoints.interval.seconds=-1\n"
    )
    cfg = load_config(tmp_path / "mm2.properties")
    assert not cfg.flow("A", "B").emit_heartbeats_enabled
    assert not cfg.flow("A", "B").emit_checkpoints_enabled
    assert cfg.flow("B", "A").emit_checkpoints_enabled


def test_policies_resolve_by_any_of_their_names(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(
        MINIMAL
        + "A->B.replication.policy.class = DefaultReplicationPolicy\n"
        + "A->B.replication.policy.separator = _\n"
        + "B->A.topic.rename.format = ${topic}.from-${source}\n"
    )
    cfg = load_config(tmp_path / "mm2.properties")
    a_to_b, b_to_a = cfg.flow("A", "B"), cfg.flow("B", "A")
    assert policy_for(a_to_b.policy, "A").remote_topic("A", "orders") == "A_orders"
    assert b_to_a.policy.kind == "rename"
    assert policy_for(b_to_a.policy, "B").remote_topic("B", "orders") == "orders.from-B"


def test_client_settings_layer_and_safety_settings_always_win(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(
        MINIMAL
        + "security.protocol = SSL\n"
        + "B.security.protocol = PLAINTEXT\n"
        + "A.client.id = ferry-a\n"
        + "A.consumer.client.id = ferry-a-reader\n"
        + "A.producer.compression.type = zstd\n"
        + "A.admin.request.timeout.ms = 5000\n"
        + "A.consumer.key.deserializer = org.apache.kafka.common.serialization.BytesDeserializer\n"
    )
    cfg = load_config(tmp_path / "mm2.properties")
    a, b = cfg.clusters["A"], cfg.clusters["B"]
    consumer = a.consumer_config()
    assert consumer["client.id"] == "ferry-a-reader"
    assert consumer["security.protocol"] == "SSL"
    assert consumer["enable.auto.commit"] == "false"
    assert consumer["isolation.level"] == "read_committed"
    assert "compression.type" not in consumer
    producer = a.producer_config()
    assert producer["client.id"] == "ferry-a" and producer["compression.type"] == "zstd"
    assert producer["acks"] == "all" and producer["enable.idempotence"] == "true"
    assert a.admin_config()["request.timeout.ms"] == "5000"
    assert b.admin_config() == {"security.protocol": "PLAINTEXT", "bootstrap.servers": "h:2"}
    assert cfg.ignored_keys == ("A.consumer.key.deserializer",)


def test_relative_state_dir_is_anchored_at_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "ferry.yaml").write_text(
        "clusters:\n  A: {bootstrap.servers: 'h:1'}\nferry.state.dir: ../state\n"
    )
    cfg = load_config(tmp_path / "conf" / "ferry.yaml")
    assert cfg.state_dir == tmp_path / "conf" / ".." / "state"
    assert cfg.flows == ()


def test_the_model_is_immutable() -> None:
    flow = FlowConfig(source="A", target="B")
    with pytest.raises(ValidationError, match="frozen"):
        flow.enabled = True  # type: ignore[misc]
