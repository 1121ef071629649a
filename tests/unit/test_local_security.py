"""Secure local clusters' ingredients without a broker: certificates, settings, ACL rows."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from ferry.local.certificates import CertificateAuthority
from ferry.local.security import prepare
from ferry.ops.permissions import FERRY_PERMISSIONS, missing_permissions, permissions_for


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_a_broker_certificate_is_signed_by_the_ca_for_the_loopback_names(tmp_path: Path) -> None:
    ca = CertificateAuthority.open(tmp_path)
    issued = ca.issue("broker-A", server=True)
    cert, root = _cert(issued.certificate), _cert(ca.certificate)
    cert.verify_directly_issued_by(root)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    # the keystore is the key followed by the chain, leaf first
    keystore = issued.keystore.read_text()
    assert keystore.startswith("-----BEGIN PRIVATE KEY-----")
    assert keystore.endswith(issued.certificate.read_text())
    for private in (issued.key, issued.keystore, tmp_path / "ca.key"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private


def test_the_ca_is_kept_and_reused_by_every_cluster_of_a_directory(tmp_path: Path) -> None:
    first = CertificateAuthority.open(tmp_path).certificate.read_bytes()
    assert CertificateAuthority.open(tmp_path).certificate.read_bytes() == first


def test_sasl_ssl_creates_both_scram_users_at_format_time_with_the_clients_passwords(
    tmp_path: Path,
) -> None:
    secured = prepare("sasl_ssl", "A", tmp_path)
    for principal in (secured.ferry, secured.admin):
        user, password = principal["sasl.username"], principal["sasl.password"]
        assert f"--add-scram=SCRAM-SHA-512=[name={user},password={password}]" in (
            secured.format_args
        )
        assert principal["security.protocol"] == "SASL_SSL"
        assert principal["ssl.ca.location"] == str(tmp_path / "tls" / "ca.pem")
    assert secured.ferry["sasl.password"] != secured.admin["sasl.password"]
    broker = secured.broker
    assert broker["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SSL"
    assert broker["super.users"] == "User:admin;User:broker-A"
    assert (
        secured.admin["sasl.password"]
        in broker["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    )


def test_mutual_tls_gives_each_principal_a_certificate_named_after_it(tmp_path: Path) -> None:
    secured = prepare("ssl", "B", tmp_path)
    assert secured.broker["ssl.client.auth"] == "required"
    assert secured.format_args == ()
    for name, principal in (("ferry", secured.ferry), ("admin", secured.admin)):
        cert = _cert(Path(principal["ssl.certificate.location"]))
        common_name = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert common_name == name
        assert "sasl.username" not in principal


def test_plaintext_changes_nothing(tmp_path: Path) -> None:
    secured = prepare("plaintext", "A", tmp_path)
    assert (secured.broker, secured.ferry, secured.format_args) == ({}, {}, ())
    assert not (tmp_path / "tls").exists()


def test_each_acl_is_granted_once_even_when_both_sides_need_it() -> None:
    both = permissions_for("source", "target")
    keys = [(r.resource, r.name, r.pattern, r.operation) for r in both]
    assert len(keys) == len(set(keys))
    assert set(keys) == {(r.resource, r.name, r.pattern, r.operation) for r in FERRY_PERMISSIONS}
    assert all(r.side == "source" for r in permissions_for("source"))


def test_an_operation_the_cluster_did_not_grant_is_missing_and_unasked_rows_are_not() -> None:
    everything = {
        (r.resource, r.name): frozenset(
            row.operation
            for row in FERRY_PERMISSIONS
            if (row.resource, row.name) == (r.resource, r.name)
        )
        for r in FERRY_PERMISSIONS
    }
    assert missing_permissions("target", everything) == []
    without_alter = {
        **everything,
        ("TOPIC", "*"): everything[("TOPIC", "*")] - {"ALTER_CONFIGS"},
    }
    missing = missing_permissions("target", without_alter)
    assert [(r.resource, r.name, r.operation) for r in missing] == [("TOPIC", "*", "ALTER_CONFIGS")]
    # A group nobody asked about (absent) is not judged; one the principal may not even
    # describe (empty) misses every operation.
    assert missing_permissions("source", {("GROUP", "*"): frozenset()}) == [
        r for r in FERRY_PERMISSIONS if r.side == "source" and r.resource == "GROUP"
    ]


def test_a_missing_row_reads_as_the_kafka_acls_command_that_grants_it() -> None:
    row = next(r for r in FERRY_PERMISSIONS if r.resource == "TRANSACTIONAL_ID")
    assert row.grant_command("ferry") == (
        "kafka-acls.sh --add --allow-principal User:ferry --operation Describe "
        "--transactional-id 'ferry:' --resource-pattern-type prefixed"
    )
    configs = next(r for r in FERRY_PERMISSIONS if r.operation == "DESCRIBE_CONFIGS")
    assert "--operation DescribeConfigs --topic '*'" in configs.grant_command("ferry")


def test_local_up_refuses_an_unknown_security_mode_before_starting_anything(
    tmp_path: Path,
) -> None:
    from tests.ferry_cli import run_ferry

    result = run_ferry("local", "up", "--dir", str(tmp_path / "d"), "--security", "tls")
    assert result.returncode == 1
    assert "--security 'tls' is not one of plaintext, sasl_ssl, ssl" in result.stderr
    assert not (tmp_path / "d").exists()


def test_rows_of_a_part_the_flow_turned_off_are_not_needed_and_only_copy_rows_stop_it() -> None:
    from ferry.config.model import FlowConfig

    quiet_source = FlowConfig(
        source="A",
        target="B",
        emit_heartbeats_enabled=False,
        sync_topic_acls_enabled=False,
        protect_remote_topics=False,
    )
    needed = {
        (r.resource, r.name, r.operation) for r in FERRY_PERMISSIONS if r.needed(quiet_source)
    }
    assert ("TOPIC", "heartbeats", "WRITE") not in needed
    assert ("CLUSTER", "kafka-cluster", "ALTER") not in needed
    assert ("TOPIC", "*", "READ") in needed
    # ALTER on the target's cluster: ACL sync's creates, or protection's DENYs; either needs it.
    for flag in ("sync_topic_acls_enabled", "protect_remote_topics"):
        one = quiet_source.model_copy(update={flag: True})
        assert ("CLUSTER", "kafka-cluster", "ALTER") in {
            (r.resource, r.name, r.operation) for r in FERRY_PERMISSIONS if r.needed(one)
        }, flag
    assert all(r.needed(FlowConfig(source="A", target="B")) for r in FERRY_PERMISSIONS)
    stops = {(r.side, r.resource, r.operation) for r in FERRY_PERMISSIONS if r.stops}
    assert ("source", "TOPIC", "READ") in stops and ("target", "TOPIC", "WRITE") in stops
    assert ("target", "TOPIC", "ALTER_CONFIGS") not in stops  # settings sync only
    assert ("source", "TOPIC", "WRITE") not in stops  # heartbeats only
