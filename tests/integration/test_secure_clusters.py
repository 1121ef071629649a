"""ferry against secure clusters as production runs them: TLS, SCRAM or mutual TLS, ACLs.

The clusters come from `ferry local up --security`, and ferry runs as its `ferry` principal,
which has exactly the ACLs `ferry.ops.permissions` lists (the README's list): a copy in both
modes, checkpoints, heartbeats, ACL and config sync, status, doctor and a failover all
succeeding with them is the least-privilege test. Cluster start-up is the cost (TLS and SCRAM
add seconds to each), so one SASL_SSL pair and one mutual-TLS pair serve every secure module,
which runs under its own marker: `make secure-test` (the pairs: tests/integration/secure_pair.py).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from ferry.config import load_config
from ferry.engine.runner import Runner
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_all, wait_for
from tests.integration.replication_setup import run_beside, run_once
from tests.integration.secure_pair import SecurePair, Settings, commit, committed, properties

# Starting a pair of TLS clusters and Spark took up to 165 s on a busy 2-core machine, and the
# first test's timeout counts its fixtures' set-up too.
pytestmark = [pytest.mark.integration, pytest.mark.secure, pytest.mark.timeout(900)]

NOW_MS = int(time.time() * 1000)


def _records(n: int) -> list[Rec]:
    return [Rec(i % 2, b"k%d" % i, b"v%d" % i, (("h", b"x"),), NOW_MS + i) for i in range(n)]


def _values(records: list[Rec]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.partition, r.key, r.value) for r in records]


def _topic_acls(settings: Settings, topic: str) -> list[AclBinding]:
    admin = AdminClient(settings)
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return list(admin.describe_acls(wanted).result(30))


def _grant_alice_read(pair: SecurePair, topic: str) -> None:
    alice_reads = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin = AdminClient(pair.admin("A"))  # kept: its futures die with it
    for future in admin.create_acls([alice_reads]).values():
        future.result(30)


def _wait_acl_synced(pair: SecurePair, remote: str) -> None:
    wait_for(
        lambda: any(
            acl.principal == "User:alice" and acl.operation == AclOperation.READ
            for acl in _topic_acls(pair.admin("B"), remote)
        ),
        30,
        f"alice's READ ACL synced to {remote} on B",
    )


def _fail_over(
    pair: SecurePair, config: Path, group: str, positions: dict[tuple[str, int], int]
) -> None:
    """`ferry failover` of `group` from A to B: a fresh remote topic takes the source's
    offsets one for one."""
    failover = run_ferry("failover", "group", "-c", str(config), group, "--from", "A", "--to", "B")
    assert failover.returncode == 0, failover.stdout + failover.stderr
    expected = {(f"A.{topic}", p): offset for (topic, p), offset in positions.items()}
    assert committed(pair.admin("B"), group, list(expected)) == expected


def test_local_up_settings_reach_sasl_ssl_clusters_as_ferry_with_only_its_acls(
    sasl_ssl: SecurePair, topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """At-least-once with librdkafka's keys exactly as `local up --json` printed them, plus
    checkpoints, heartbeats, ACL and config sync, status, doctor and a failover."""
    state = sasl_ssl.state
    for alias in ("A", "B"):
        ferry = sasl_ssl.ferry(alias)
        assert state[alias]["client"] == ferry  # clusters.json keeps what --json printed
        assert ferry["security.protocol"] == "SASL_SSL"
        assert ferry["sasl.mechanism"] == "SCRAM-SHA-512"
        assert ferry["sasl.username"] == "ferry"
        assert Path(ferry["ssl.ca.location"]).is_file()

    a_admin = sasl_ssl.admin_only("A")
    a = sasl_ssl.bootstrap("A")
    create_topic(a, topic_name, 2, a_admin)
    sent = _records(200)
    produce(a, topic_name, sent, a_admin)
    group = f"app-{uuid.uuid4().hex[:6]}"
    positions = {(topic_name, 0): 40, (topic_name, 1): 60}
    commit(sasl_ssl.admin("A"), group, positions)
    _grant_alice_read(sasl_ssl, topic_name)

    config = properties(
        tmp_path,
        {"A": sasl_ssl.ferry("A"), "B": sasl_ssl.ferry("B")},
        f"{topic_name}.*",
        **{"sync.group.offsets.enabled": "false"},
    )
    progress = run_once(config, spark)
    assert progress["A->B"].records == 200

    remote = f"A.{topic_name}"
    b_admin = sasl_ssl.admin_only("B")
    copied = read_all(sasl_ssl.bootstrap("B"), remote, 2, 200, client=b_admin)
    assert sorted(_values(copied)) == sorted(_values(sent))
    # ACL sync (READ kept, for alice, on the remote topic) and heartbeats on the source.
    _wait_acl_synced(sasl_ssl, remote)
    assert "heartbeats" in AdminClient(sasl_ssl.admin("A")).list_topics(timeout=30).topics

    status = run_ferry("status", "-c", str(config), "--json")
    assert status.returncode == 0, status.stderr
    assert "AUTHORIZATION" not in status.stdout + status.stderr
    doctor = run_ferry("doctor", "-c", str(config))
    # Single-node clusters hold one replica of everything: warnings (exit 2), never an error.
    assert doctor.returncode == 2, doctor.stdout + doctor.stderr
    assert "0 error(s)" in doctor.stdout
    assert "AUTHORIZATION" not in doctor.stdout + doctor.stderr

    monitor = run_ferry("monitor", "-c", str(config), "--once")
    assert monitor.returncode == 0, monitor.stdout + monitor.stderr
    assert "AUTHORIZATION" not in monitor.stdout + monitor.stderr
    translate = run_ferry(
        "translate", "-c", str(config), "--group", group, "--from", "A", "--to", "B", "--json"
    )
    assert translate.returncode == 0, translate.stdout + translate.stderr
    assert str(positions[(topic_name, 1)]) in translate.stdout, translate.stdout

    _fail_over(sasl_ssl, config, group, positions)


def test_exactly_once_with_mm2s_java_keys_on_sasl_ssl(
    sasl_ssl: SecurePair, topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """MM2's spelling: a SCRAM JAAS line and a PEM truststore, translated for librdkafka."""

    def java(alias: str) -> Settings:
        ferry = sasl_ssl.ferry(alias)
        return {
            "bootstrap.servers": ferry["bootstrap.servers"],
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="ferry" password="{ferry["sasl.password"]}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ferry["ssl.ca.location"],
        }

    a = sasl_ssl.bootstrap("A")
    create_topic(a, topic_name, 2, sasl_ssl.admin_only("A"))
    sent = _records(150)
    more = sent[75:]
    produce(a, topic_name, sent[:75], sasl_ssl.admin_only("A"))
    config = properties(
        tmp_path,
        {"A": java("A"), "B": java("B")},
        topic_name,
        **{"exactly.once.source.support": "enabled", "emit.heartbeats.enabled": "false"},
    )
    # Continuous, in leases: half the records are there at the start, half arrive meanwhile.
    runner = Runner(load_config(config), spark=spark)

    def produce_the_rest_and_wait_for_them() -> None:
        produce(a, topic_name, more, sasl_ssl.admin_only("A"))
        committed = {**sasl_ssl.admin_only("B"), "isolation.level": "read_committed"}
        read_all(sasl_ssl.bootstrap("B"), f"A.{topic_name}", 2, 150, 180, committed)

    run_beside(runner, produce_the_rest_and_wait_for_them)
    copied = read_all(
        sasl_ssl.bootstrap("B"),
        f"A.{topic_name}",
        2,
        150,
        client={**sasl_ssl.admin_only("B"), "isolation.level": "read_committed"},
    )
    assert sorted(_values(copied)) == sorted(_values(sent))


def test_mutual_tls_clusters_copy_sync_acls_fail_over_and_audit_as_the_ferry_certificate(
    mutual_tls: SecurePair, topic_name: str, tmp_path: Path, spark: Any
) -> None:
    for alias in ("A", "B"):
        ferry = mutual_tls.ferry(alias)
        assert ferry["security.protocol"] == "SSL"
        assert Path(ferry["ssl.certificate.location"]).is_file()
        assert "sasl.username" not in ferry
    a = mutual_tls.bootstrap("A")
    create_topic(a, topic_name, 2, mutual_tls.admin_only("A"))
    sent = _records(120)
    produce(a, topic_name, sent, mutual_tls.admin_only("A"))
    group = f"app-{uuid.uuid4().hex[:6]}"
    positions = {(topic_name, 0): 25, (topic_name, 1): 35}
    commit(mutual_tls.admin("A"), group, positions)
    _grant_alice_read(mutual_tls, topic_name)
    config = properties(
        tmp_path,
        {"A": mutual_tls.ferry("A"), "B": mutual_tls.ferry("B")},
        topic_name,
        **{
            "emit.heartbeats.enabled": "false",
            "sync.group.offsets.enabled": "false",
            "ferry.copier": "python",  # the SASL_SSL tests run the native copy loop
        },
    )
    assert run_once(config, spark)["A->B"].records == 120
    copied = read_all(
        mutual_tls.bootstrap("B"), f"A.{topic_name}", 2, 120, client=mutual_tls.admin_only("B")
    )
    assert sorted(_values(copied)) == sorted(_values(sent))
    _wait_acl_synced(mutual_tls, f"A.{topic_name}")
    _fail_over(mutual_tls, config, group, positions)

    # The audit reads both sides with Spark's Kafka connector, a Java client: the certificate
    # and CA reach it translated (PEM keystore and truststore).
    audit = run_ferry("audit", "-c", str(config), "--topics", topic_name, "--json", timeout=300)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    topic = json.loads(audit.stdout)["flows"]["A->B"]["topics"][topic_name]
    assert (topic["source"], topic["copied"], topic["missing"]) == (120, 120, 0)


def _ferry_acl(operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        "*",
        ResourcePatternType.LITERAL,
        "User:ferry",
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def _doctor(config: Path) -> tuple[int, list[dict[str, str]]]:
    """`ferry doctor --json`'s exit code and its ACL findings, errors and warnings."""
    doctor = run_ferry("doctor", "-c", str(config), "--json")
    assert doctor.returncode in (0, 1, 2), doctor.stdout + doctor.stderr
    found = json.loads(doctor.stdout)
    return doctor.returncode, [f for f in found["errors"] + found["warnings"] if f["kind"] == "acl"]


def _acl_findings(config: Path) -> list[dict[str, str]]:
    return _doctor(config)[1]


def test_doctor_names_the_acl_removed_from_ferrys_principal(
    sasl_ssl: SecurePair, topic_name: str, tmp_path: Path
) -> None:
    create_topic(sasl_ssl.bootstrap("A"), topic_name, 1, sasl_ssl.admin_only("A"))
    create_topic(sasl_ssl.bootstrap("B"), f"A.{topic_name}", 1, sasl_ssl.admin_only("B"))
    group = f"synced-{uuid.uuid4().hex[:6]}"  # a group the flow syncs: its ACLs are judged too
    commit(sasl_ssl.admin("A"), group, {(topic_name, 0): 0})
    config = properties(
        tmp_path,
        {"A": sasl_ssl.ferry("A"), "B": sasl_ssl.ferry("B")},
        topic_name,
        groups=group,
    )
    assert _acl_findings(config) == []  # the granted list is what doctor checks

    b_admin = AdminClient(sasl_ssl.admin("B"))
    alter_configs = _ferry_acl(AclOperation.ALTER_CONFIGS)
    granted = AclBindingFilter(
        ResourceType.TOPIC,
        "*",
        ResourcePatternType.LITERAL,
        "User:ferry",
        "*",
        AclOperation.ALTER_CONFIGS,
        AclPermissionType.ALLOW,
    )
    assert len(b_admin.delete_acls([granted])[granted].result(30)) == 1
    try:
        found: list[list[dict[str, str]]] = []
        wait_for(
            lambda: bool(found.append(_acl_findings(config)) or found[-1]),
            60,
            "doctor to see the removed ACL",
        )
        (finding,) = found[-1]
        assert (finding["cluster"], finding["severity"]) == ("B", "warning")  # settings only
        assert _doctor(config)[0] == 2  # single-node: RF 1 warnings besides; no error
        assert "may not ALTER_CONFIGS on TOPIC '*' (sync topic settings)" in finding["detail"]
        assert "as the target of flow A->B" in finding["detail"]
        assert (
            "kafka-acls.sh --add --allow-principal User:ferry --operation AlterConfigs "
            "--topic '*'" in finding["detail"]
        )
    finally:
        for future in b_admin.create_acls([alter_configs]).values():
            future.result(30)
        wait_for(lambda: _acl_findings(config) == [], 60, "ferry's ACLs restored")

    # Without READ on groups of B ferry cannot commit its position: replication stops, an error.
    group_read = AclBinding(
        ResourceType.GROUP,
        "*",
        ResourcePatternType.LITERAL,
        "User:ferry",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    group_read_filter = AclBindingFilter(
        ResourceType.GROUP,
        "*",
        ResourcePatternType.LITERAL,
        "User:ferry",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    assert len(b_admin.delete_acls([group_read_filter])[group_read_filter].result(30)) == 1
    try:
        seen: list[tuple[int, list[dict[str, str]]]] = []
        wait_for(lambda: bool(seen.append(_doctor(config)) or seen[-1][0] == 1), 60, "an error")
        code, findings = seen[-1]
        errors = [f for f in findings if f["severity"] == "error"]
        assert code == 1 and errors, findings
        assert any("may not READ on GROUP '*'" in f["detail"] for f in errors), errors
        assert all(f["cluster"] == "B" for f in errors), errors
    finally:
        for future in b_admin.create_acls([group_read]).values():
            future.result(30)
        wait_for(lambda: _acl_findings(config) == [], 60, "ferry's ACLs restored")


def test_the_demo_on_secure_clusters_loses_nothing_and_prints_no_secret(tmp_path: Path) -> None:
    """`ferry demo --secure`: its own SASL_SSL pair, ferry as its least-privileged principal,
    the password in a file the config refers to; both acts, and no secret on the console."""
    directory = tmp_path / "demo"
    result = run_ferry("demo", "--secure", "--keep", "--dir", str(directory), timeout=600)
    try:
        everything = result.stdout + result.stderr
        assert result.returncode == 0, everything
        assert "Both clusters are secure" in everything
        assert "lost 0, read twice 0" in everything, everything
        secrets = (directory / "secrets.properties").read_text()
        assert (directory / "secrets.properties").stat().st_mode & 0o077 == 0
        config = (directory / "ferry.yaml").read_text()
        assert "SASL_SSL" in config and "${file:" in config, config
        passwords = [line.split("=", 1)[1] for line in secrets.splitlines() if "=" in line]
        assert passwords and all(len(p) >= 8 for p in passwords), secrets
        for password in passwords:
            assert password not in everything
            assert password not in config
    finally:
        assert run_ferry("local", "down", "--dir", str(directory)).returncode == 0
