"""ferry.yaml and MM2 .properties files load into the same model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.config import FerryConfig, entries_from_properties, load_config

MM2_PROPERTIES = r"""
# Kafka's config/connect-mirror-maker.properties, with a few more MM2 keys
clusters = A, B
A.bootstrap.servers = 127.0.0.1:9092
B.bootstrap.servers = 127.0.0.1:9093

A->B.enabled = true
A->B.topics = orders, payments\\..*
B->A.enabled = false
replication.factor=1
checkpoints.topic.replication.factor=1
offset.storage.replication.factor=1
config.storage.replication.factor=1
tasks.max = 4
sync.group.offsets.enabled = true
A->B.emit.checkpoints.interval.seconds = 5
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
A.consumer.fetch.min.bytes : 1024
B.producer.linger.ms 20
security.protocol = SASL_PLAINTEXT
sasl.mechanism = SCRAM-SHA-512
B.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="ferry" password="p\\"w";
spark.sql.shuffle.partitions = 2
ferry.state.dir = state
"""

FERRY_YAML = r"""
clusters:
  A:
    bootstrap.servers: 127.0.0.1:9092
    consumer:
      fetch.min.bytes: 1024
  B:
    bootstrap:
      servers: 127.0.0.1:9093
    producer: {linger.ms: 20}
    sasl.jaas.config: >-
      org.apache.kafka.common.security.scram.ScramLoginModule required
      username="ferry" password="p\"w";
A->B:
  enabled: true
  topics: [orders, 'payments\..*']
  emit.checkpoints.interval.seconds: 5
B->A: {enabled: false}
replication:
  factor: 1
  policy.class: org.apache.kafka.connect.mirror.IdentityReplicationPolicy
checkpoints.topic.replication.factor: 1
offset.storage.replication.factor: 1
config.storage.replication.factor: 1
tasks.max: 4
sync.group.offsets.enabled: yes
security.protocol: SASL_PLAINTEXT
sasl.mechanism: SCRAM-SHA-512
spark:
  sql.shuffle.partitions: 2
ferry.state.dir: state
"""


def _without_path(cfg: FerryConfig) -> FerryConfig:
    return cfg.model_copy(update={"path": None, "ignored_keys": tuple(sorted(cfg.ignored_keys))})


def test_the_same_settings_in_yaml_and_properties_give_equal_models(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(MM2_PROPERTIES)
    (tmp_path / "ferry.yaml").write_text(FERRY_YAML)
    from_properties = load_config(tmp_path / "mm2.properties")
    from_yaml = load_config(tmp_path / "ferry.yaml")
    assert _without_path(from_properties) == _without_path(from_yaml)

    cfg = from_yaml
    assert [f.name for f in cfg.enabled_flows] == ["A->B"]
    a_to_b = cfg.flow("A", "B")
    assert a_to_b.topics == ("orders", r"payments\..*")
    assert a_to_b.emit_checkpoints_interval_seconds == 5
    assert cfg.flow("B", "A").emit_checkpoints_interval_seconds == 60
    assert a_to_b.policy.kind == "identity"
    assert a_to_b.sync_group_offsets_enabled and a_to_b.replication_factor == 1
    assert cfg.clusters["A"].consumer_config()["fetch.min.bytes"] == "1024"
    b_producer = cfg.clusters["B"].producer_config()
    assert b_producer["linger.ms"] == "20"
    assert b_producer["sasl.username"] == "ferry" and b_producer["sasl.password"] == 'p"w'
    assert b_producer["security.protocol"] == "SASL_PLAINTEXT"
    assert "sasl.username" not in cfg.clusters["A"].consumer_config()
    assert cfg.spark == {"spark.sql.shuffle.partitions": "2"}
    assert cfg.state_dir == tmp_path / "state"
    assert set(cfg.ignored_keys) == {
        "offset.storage.replication.factor",
        "config.storage.replication.factor",
        "tasks.max",
    }


def test_properties_syntax_follows_java_util_properties() -> None:
    text = (
        "# comment\n"
        "  ! another comment\n"
        "a.key = value  \n"
        "colon:sep\n"
        "space sep\n"
        "escaped\\=key=x\\ty\n"
        "unicode=\\u0041\\u00e9\n"
        "multi = one, \\\n"
        "        two\n"
        "empty\n"
    )
    assert [(e.key, e.value, e.line) for e in entries_from_properties(text)] == [
        ("a.key", "value  ", 3),
        ("colon", "sep", 4),
        ("space", "sep", 5),
        ("escaped=key", "x\ty", 6),
        ("unicode", "Aé", 7),
        ("multi", "one, two", 8),
        ("empty", "", 10),
    ]


# --- property test: any valid settings, written either way, load to the same model --------

_SETTING_VALUES = {
    "topics": st.lists(st.sampled_from(["orders", r"pay\..*", "a-b_c", ".*"]), min_size=1).map(
        ", ".join
    ),
    "groups.exclude": st.lists(st.sampled_from(["g1", "console-.*", r"x\d+"]), min_size=1).map(
        ", ".join
    ),
    "offset.lag.max": st.integers(0, 10_000).map(str),
    "emit.checkpoints.interval.seconds": st.integers(-1, 3600).map(str),
    "sync.group.offsets.enabled": st.sampled_from(["true", "false", "TRUE"]),
    "replication.policy.separator": st.sampled_from([".", "_", "::", " - "]),
    "exactly.once.source.support": st.sampled_from(["disabled", "preparing", "enabled"]),
    "replication.factor": st.sampled_from(["1", "3", "-1"]),
}
_CLIENT_VALUES = {
    "consumer.fetch.min.bytes": st.integers(1, 10**6).map(str),
    "producer.linger.ms": st.integers(0, 1000).map(str),
    "client.id": st.text("abc-=: #!\\é", min_size=1, max_size=8).map(lambda s: "c" + s),
}


def _escape_properties(text: str, *, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "=:#!" or (ch == " " and (key or i == 0)):
            out.append("\\" + ch)
        elif ord(ch) > 126:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


@st.composite
def _settings(draw: st.DrawFn) -> dict[str, str]:
    chosen: dict[str, str] = {
        "clusters": "A, B",
        "A.bootstrap.servers": "127.0.0.1:1",
        "B.bootstrap.servers": "127.0.0.1:2",
    }
    for key, values in _SETTING_VALUES.items():
        scope = draw(st.sampled_from(["", "A->B.", "B->A.", None]))
        if scope is not None:
            chosen[scope + key] = draw(values)
    for key, values in _CLIENT_VALUES.items():
        alias = draw(st.sampled_from(["A.", "B.", None]))
        if alias is not None:
            chosen[alias + key] = draw(values)
    chosen["A->B.enabled"] = draw(st.sampled_from(["true", "false"]))
    return chosen


@settings(max_examples=60, deadline=None)
@given(_settings())
def test_any_settings_load_the_same_from_yaml_and_properties(
    tmp_path_factory: pytest.TempPathFactory, chosen: dict[str, str]
) -> None:
    directory = tmp_path_factory.mktemp("cfg")
    lines = [
        f"{_escape_properties(k, key=True)} = {_escape_properties(v, key=False)}"
        for k, v in chosen.items()
    ]
    (directory / "mm2.properties").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "ferry.yaml").write_text(yaml.safe_dump(chosen, allow_unicode=True), "utf-8")
    from_properties = load_config(directory / "mm2.properties")
    from_yaml = load_config(directory / "ferry.yaml")
    assert _without_path(from_properties) == _without_path(from_yaml)
    client_id = chosen.get("A.client.id")
    if client_id is not None:
        assert from_yaml.clusters["A"].admin_config()["client.id"] == client_id.strip()
