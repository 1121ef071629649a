"""Every way a config file can be wrong gets a message naming file, line, key, value and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import FerryConfig, load_config
from ferry.errors import ConfigError, UnsafeConfigError

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _load(tmp_path: Path, text: str, name: str = "mm2.properties") -> FerryConfig:
    (tmp_path / name).write_text(text)
    return load_config(tmp_path / name)


def _error(tmp_path: Path, extra: str, expected: type[ConfigError] = ConfigError) -> str:
    """Load BASE plus `extra` (starting at line 4) and return the error message."""
    with pytest.raises(expected) as info:
        _load(tmp_path, BASE + extra)
    return str(info.value)


# (extra lines, text the message must contain); the error is always on line 4
CASES = [
    (
        "topcis = orders\n",
        "key 'topcis': 'topcis' is not a ferry or MirrorMaker 2 setting; did you mean 'topics'?",
    ),
    ("A->B.topcs = x\n", "did you mean 'topics'?"),
    ("A->C.enabled = true\n", "names cluster 'C', which is not in clusters (A, B)"),
    ("C.bootstrap.servers = h:1\n", "names cluster 'C', which is not in clusters (A, B)"),
    ("A->A.enabled = true\n", "a flow cannot go from A to itself"),
    ("A->B.enabled = yes\n", "key 'A->B.enabled': 'yes' is not allowed; allowed: true, false"),
    ("offset.lag.max = lots\n", "'lots' is not allowed; allowed: a whole number, 0 or more"),
    ("offset.lag.max = -5\n", "'-5' is not allowed; allowed: a whole number, 0 or more"),
    ("emit.checkpoints.interval.seconds = 1.5\n", "allowed: whole seconds; a negative number"),
    (
        "replication.factor = 0\n",
        "'0' is not allowed; allowed: a whole number, 1 or more, or -1 for the broker default",
    ),
    ("topics = orders, pay(\n", "'pay(' is not a valid regular expression"),
    ("exactly.once.source.support = on\n", "allowed: disabled, preparing, enabled"),
    ("A->B.ferry.copier = fast\n", "key 'A->B.ferry.copier': 'fast' is not allowed; allowed: auto"),
    (
        "replication.policy.class = com.example.MyPolicy\n",
        "'com.example.MyPolicy' is not a replication policy ferry implements; allowed: "
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    ),
    (
        "topic.rename.format = ${topic}.replica\n"
        "replication.policy.class = IdentityReplicationPolicy\n",
        "key 'topic.rename.format': conflicts with replication.policy.class = "
        "IdentityReplicationPolicy (line 5)",
    ),
    ("topic.rename.format = copy-of-x\n", "lacks ${topic}"),
    ("replication.policy.class = rename\n", "'rename' needs topic.rename.format"),
    ("replication.policy.separator =\n", "is empty; MirrorMaker 2's default is '.'"),
    ("A.ssl.truststore.location = /etc/ts.jks\n", "cannot read /etc/ts.jks (No such file"),
    ("A.consumer.fetch.min.byte = 1\n", "did you mean 'fetch.min.bytes'?"),
    ("A.consumer.linger.ms = 5\n", "'linger.ms' is not a librdkafka consumer setting"),
    (
        "A.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required;\n",
        "uses Krb5LoginModule, which ferry cannot translate; set librdkafka's own keys",
    ),
    (
        "A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="u";\n',
        "PlainLoginModule needs password",
    ),
    ("A.sasl.jaas.config = nonsense\n", "is not a JAAS login module line"),
    ("topic.filter.class = com.example.Filter\n", "is a custom MirrorMaker filter"),
    ("A.bootstrap.servers = again:1\n", "is set twice (lines 2 and 4); keep one"),
]


@pytest.mark.parametrize(("extra", "expected"), CASES, ids=[c[0].split("=")[0] for c in CASES])
def test_bad_settings_are_refused_with_file_line_and_key(
    tmp_path: Path, extra: str, expected: str
) -> None:
    message = _error(tmp_path, extra)
    assert message.startswith(f"{tmp_path / 'mm2.properties'}:4, key '"), message
    assert expected in message, message


UNSAFE = [
    ("A.consumer.enable.auto.commit = true", "auto commit would record source progress"),
    ("A.enable.auto.commit = TRUE", "auto commit would record source progress"),
    ("B.consumer.isolation.level = read_uncommitted", "would copy records of aborted"),
    ("B.producer.acks = 1", "ferry sets acks=all itself; remove the key"),
    ("A.acks = 0", "ferry sets acks=all itself"),
    ("A.producer.enable.idempotence = false", "can be duplicated or reordered"),
]


@pytest.mark.parametrize(("line", "expected"), UNSAFE)
def test_settings_that_could_lose_data_are_refused(
    tmp_path: Path, line: str, expected: str
) -> None:
    message = _error(tmp_path, line + "\n", UnsafeConfigError)
    key, value = (part.strip() for part in line.split("="))
    assert f"key '{key}': '{value}' is refused" in message
    assert expected in message


def test_safe_values_of_the_same_keys_are_accepted_and_reach_the_clients(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        BASE + "B.producer.acks = -1\nA.consumer.enable.auto.commit = false\n"
        "A.isolation.level = read_committed\nB.enable.idempotence = true\n",
    )
    producer = config.clusters["B"].producer_config()
    consumer = config.clusters["A"].consumer_config()
    assert (producer["acks"], producer["enable.idempotence"]) == ("all", "true")  # -1 is all
    assert (consumer["enable.auto.commit"], consumer["isolation.level"]) == (
        "false",
        "read_committed",
    )


def test_a_file_without_clusters_says_how_to_list_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no 'clusters' key; list the cluster aliases"):
        _load(tmp_path, "A.bootstrap.servers = h:1\n")


def test_a_cluster_without_bootstrap_servers_names_the_key_to_set(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "clusters = A, B\nA.bootstrap.servers = h:1\n")
    assert "key 'B.bootstrap.servers': cluster 'B' has no bootstrap servers" in str(info.value)


@pytest.mark.parametrize(
    ("clusters", "expected"),
    [
        ("A, B.x", "alias 'B.x' is not allowed; use letters, digits"),
        ("A, A", "alias 'A' is listed twice"),
        ("spark, B", "alias 'spark' clashes with ferry's own keys"),
        ("A, ssl", "alias 'ssl' clashes with ferry's own keys"),
        (" , ", "is empty; list the cluster aliases"),
    ],
)
def test_bad_cluster_lists_are_refused(tmp_path: Path, clusters: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        _load(tmp_path, f"clusters = {clusters}\n")


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: no such file"):
        load_config(tmp_path / "missing.yaml")


def test_broken_yaml_gives_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ferry\.yaml:3: not valid YAML"):
        _load(tmp_path, "clusters: [A]\nA.bootstrap.servers: h:1\ntopics: a: b\n", "ferry.yaml")


def test_yaml_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the top level must be a mapping"):
        _load(tmp_path, "- clusters\n", "ferry.yaml")


def test_a_yaml_key_without_value_is_named(tmp_path: Path) -> None:
    text = "clusters:\n  A:\n    bootstrap.servers: h:1\ntopics:\n"
    with pytest.raises(ConfigError, match=r"ferry\.yaml:4, key 'topics': has no value"):
        _load(tmp_path, text, "ferry.yaml")


def test_yaml_errors_carry_the_line_of_the_nested_key(tmp_path: Path) -> None:
    text = "clusters:\n  A:\n    bootstrap.servers: h:1\nA->B:\n  enabled: true\n"
    text += "clusters2: 1\n"
    with pytest.raises(ConfigError) as info:
        _load(
            tmp_path,
            text.replace("clusters:\n", "clusters:\n  B: {bootstrap.servers: h:2}\n"),
            "ferry.yaml",
        )
    assert "ferry.yaml:7, key 'clusters2'" in str(info.value)
    assert "did you mean 'clusters'?" in str(info.value)


def test_the_copy_loop_is_chosen_per_flow_and_defaults_to_auto(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(
        BASE + "A->B.enabled = true\nB->A.enabled = true\nB->A.ferry.copier = Python\n"
    )
    config = load_config(tmp_path / "mm2.properties")
    assert config.flow("A", "B").copier == "auto"
    assert config.flow("B", "A").copier == "python"


def test_batch_caps_default_by_mode_and_follow_the_keys(tmp_path: Path) -> None:
    (tmp_path / "mm2.properties").write_text(
        BASE + "A->B.enabled = true\nB->A.enabled = true\n"
        "B->A.exactly.once.source.support = enabled\nB->A.ferry.batch.max.records = 7\n"
    )
    config = load_config(tmp_path / "mm2.properties")
    assert config.flow("A", "B").batch_caps == (4_000_000, 1024**3)
    assert config.flow("B", "A").batch_caps == (7, 256 * 1024**2)  # transactions stay small
