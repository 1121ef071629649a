"""A local cluster with SASL/PLAIN and an ACL authorizer, reached through ferry's config.

Later work (ACL sync, secured replication) needs such brokers; this proves `ferry local up`
can start one from broker overrides alone and that an MM2-style `sasl.jaas.config` in a ferry
config file gives librdkafka working credentials.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ferry.config import load_config
from ferry.kafka import clients
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry, run_ferry_process
from tests.integration.extra_clusters import FERRY_PASSWORD, SASL_ADMIN_CLIENT

pytestmark = pytest.mark.integration

ADMIN_CLIENT = SASL_ADMIN_CLIENT


@pytest.fixture
def secured(secured_pair: dict[str, LocalCluster]) -> str:
    """Cluster S of the session's SASL pair (started by `ferry local up --set ... --client`)."""
    return secured_pair["S"].bootstrap


def _config(tmp_path: Path, bootstrap: str, password: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(
        f"clusters = S\nS.bootstrap.servers = {bootstrap}\n"
        "S.security.protocol = SASL_PLAINTEXT\nS.sasl.mechanism = PLAIN\n"
        "S.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="alice" password="{password}";\n'
    )
    return path


def _produce(config: dict[str, str], topic: str) -> str | None:
    """Produce one record; the delivery error's name, or None when the broker acknowledged."""
    outcome: list[str | None] = []
    producer = clients.producer({**config, "message.timeout.ms": "15000"})
    producer.produce(
        topic, b"v", on_delivery=lambda err, _msg: outcome.append(err.name() if err else None)
    )
    producer.flush(30)
    assert outcome, "no delivery report within 30 s"
    return outcome[0]


def test_credentials_from_a_jaas_line_reach_a_sasl_cluster_with_acls(
    secured: str, tmp_path: Path, topic_name: str
) -> None:
    admin = AdminClient({**ADMIN_CLIENT, "bootstrap.servers": secured})
    allowed, denied = f"{topic_name}-allowed", f"{topic_name}-denied"
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (allowed, denied)]).values():
        future.result(timeout=30)
    write = AclBinding(
        ResourceType.TOPIC,
        allowed,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([write]).values():
        future.result(timeout=30)

    alice = load_config(_config(tmp_path, secured, "alice-secret")).clusters["S"]
    producer_config = alice.producer_config()
    assert producer_config["sasl.username"] == "alice"
    # ACLs reach the broker's authorizer through the metadata log, shortly after create_acls.
    deadline = time.monotonic() + 30
    while (error := _produce(producer_config, allowed)) is not None:
        assert error == "TOPIC_AUTHORIZATION_FAILED", error
        assert time.monotonic() < deadline, "alice's WRITE ACL never took effect"
        time.sleep(0.2)
    assert _produce(producer_config, denied) == "TOPIC_AUTHORIZATION_FAILED"


def test_a_wrong_password_is_an_authentication_failure(secured: str, tmp_path: Path) -> None:
    intruder = load_config(_config(tmp_path, secured, "guess")).clusters["S"]
    errors: list[KafkaError] = []
    admin = AdminClient({**intruder.admin_config(), "log_level": 0, "error_cb": errors.append})
    # librdkafka connects at once and reports the failed SASL handshake to error_cb from poll().
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def _secret_config(directory: Path, bootstrap: str, topic: str, env_name: str) -> Path:
    """A->B on the one secured cluster under two aliases: A's password from the environment,
    B's whole JAAS line (with the password) from a properties file next to the work dir."""
    secrets = directory / "secrets"
    secrets.mkdir()
    (secrets / "kafka.properties").write_text(
        "b.jaas = org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="ferry" password="{FERRY_PASSWORD}";\n'
    )
    work = directory / "work"
    work.mkdir()
    path = work / "mm2.properties"
    path.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {bootstrap}\nB.bootstrap.servers = {bootstrap}\n"
        "security.protocol = SASL_PLAINTEXT\nsasl.mechanism = PLAIN\n"
        f"A.sasl.username = ferry\nA.sasl.password = ${{env:{env_name}}}\n"
        "B.sasl.jaas.config = ${file:../secrets/kafka.properties:b.jaas}\n"
        f"A->B.enabled = true\nA->B.topics = {topic}\n"
        "replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n"
        "heartbeats.topic.replication.factor = 1\noffset-syncs.topic.replication.factor = 1\n"
        "ferry.state.dir = state\nspark.master = local[2]\n"
        # Uncompressed, so the password would be found in it.
        "spark.eventLog.enabled = true\nspark.eventLog.compress = false\n"
        f"spark.eventLog.dir = {(directory / 'events').as_uri()}\n"
    )
    (directory / "events").mkdir()
    return path


@pytest.mark.processes
def test_no_output_or_file_of_ferry_holds_a_password_from_a_provider(
    secured: str, tmp_path: Path, topic_name: str
) -> None:
    admin = clients.admin_client({**ADMIN_CLIENT, "bootstrap.servers": secured})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(timeout=30)
    producer = clients.producer({**ADMIN_CLIENT, "bootstrap.servers": secured})
    for i in range(20):
        producer.produce(topic_name, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    env_name = "FERRY_TEST_A_PASSWORD"
    config = str(_secret_config(tmp_path, secured, topic_name, env_name))
    env = {env_name: FERRY_PASSWORD}

    outputs = {}
    validate = run_ferry("validate", "-c", config, env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert f"A.sasl.password (${{env:{env_name}}})" in validate.stdout, validate.stdout
    assert "B.sasl.jaas.config (${file:../secrets/kafka.properties:b.jaas})" in validate.stdout
    outputs["validate"] = validate
    # Its own process and Spark: what its JVM and Spark's event log write is checked too.
    run = run_ferry_process("run", "-c", config, "--once", "--json", env=env, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["A->B"]["records"] == 20, run.stdout
    outputs["run --once"] = run
    # Spark's JVM says what it says (WARNING: Using incubator modules...) in spark.log only.
    assert not re.search(r"\bWARN(ING)?\b", run.stdout + run.stderr), run.stderr
    for command, code in (("status", 0), ("doctor", 2)):  # doctor: one replica, a warning
        result = run_ferry(command, "-c", config, env=env)
        assert result.returncode == code, result.stdout + result.stderr
        outputs[command] = result

    for name, result in outputs.items():
        for stream in (result.stdout, result.stderr):
            assert FERRY_PASSWORD not in stream, f"ferry {name} printed the password:\n{stream}"
    written = [
        path for path in (tmp_path / "work").rglob("*") if path.is_file() and not path.is_symlink()
    ]
    events = [path for path in (tmp_path / "events").rglob("*") if path.is_file()]
    assert any(b"SparkListenerEnvironmentUpdate" in path.read_bytes() for path in events), events
    assert (tmp_path / "work" / "state" / "spark.log") in written
    for path in written + events:
        assert FERRY_PASSWORD.encode() not in path.read_bytes(), f"{path} holds the password"
