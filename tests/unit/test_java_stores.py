"""MM2's Java trust and key stores in a config file become librdkafka settings, or an error
naming the key and the conversion when librdkafka cannot read the store (JKS)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from ferry.config import FerryConfig, load_config
from ferry.config.java_stores import sniff_store
from ferry.errors import ConfigError
from ferry.local.certificates import CertificateAuthority

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _load(tmp_path: Path, extra: str) -> FerryConfig:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + extra)
    return load_config(path)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.open(tmp_path / "tls")


def _pkcs12_truststore(ca: CertificateAuthority, path: Path, password: bytes) -> None:
    cert = x509.load_pem_x509_certificate(ca.certificate.read_bytes())
    path.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [cert], serialization.BestAvailableEncryption(password)
        )
    )


def test_a_pem_truststore_becomes_ssl_ca_location(tmp_path: Path, ca: CertificateAuthority) -> None:
    config = _load(
        tmp_path,
        f"A.ssl.truststore.type = PEM\nA.ssl.truststore.location = {ca.certificate}\n",
    )
    settings = config.clusters["A"].consumer_config()
    assert settings["ssl.ca.location"] == str(ca.certificate)
    assert not any("truststore" in key for key in settings)


def test_a_pkcs12_truststore_declared_jks_is_read_by_its_content_into_ssl_ca_pem(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    store = tmp_path / "truststore.jks"  # Java opens PKCS12 files declared JKS, and so do we
    _pkcs12_truststore(ca, store, b"changeit")
    config = _load(
        tmp_path,
        f"A.ssl.truststore.location = {store}\nA.ssl.truststore.password = changeit\n",
    )
    pem = config.clusters["A"].producer_config()["ssl.ca.pem"]
    assert pem == ca.certificate.read_text()


def test_a_pkcs12_truststore_with_a_wrong_password_names_the_password_key(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    store = tmp_path / "truststore.p12"
    _pkcs12_truststore(ca, store, b"changeit")
    with pytest.raises(ConfigError) as info:
        _load(
            tmp_path,
            f"A.ssl.truststore.type = PKCS12\nA.ssl.truststore.location = {store}\n"
            "A.ssl.truststore.password = wrong-guess\n",
        )
    message = str(info.value)
    assert "key 'A.ssl.truststore.location'" in message
    assert "check ssl.truststore.password" in message
    assert "wrong-guess" not in message


@pytest.mark.parametrize(("magic", "kind"), [(b"\xfe\xed\xfe\xed", "JKS"), (b"\xce" * 4, "JCEKS")])
def test_a_jks_store_is_refused_with_the_key_and_the_keytool_conversion(
    tmp_path: Path, magic: bytes, kind: str
) -> None:
    store = tmp_path / "truststore.jks"
    store.write_bytes(magic + b"\x00\x00\x00\x02" + b"\x00" * 64)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"B.consumer.ssl.truststore.location = {store}\n")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'mm2.properties'}:4, key 'B.consumer.ssl.truststore")
    assert f"{store} is a {kind} truststore, which librdkafka" in message
    assert f"keytool -exportcert -rfc -keystore {store}" in message
    assert "ssl.ca.location" in message


def test_a_jks_keystore_is_refused_with_the_pkcs12_conversion(tmp_path: Path) -> None:
    store = tmp_path / "keystore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 64)
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"A.ssl.keystore.location = {store}\nA.ssl.keystore.password = pw\n")
    message = str(info.value)
    assert "key 'A.ssl.keystore.location'" in message
    assert f"keytool -importkeystore -srckeystore {store}" in message


def test_a_pkcs12_keystore_keeps_librdkafkas_keys_of_the_same_name(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    issued = ca.issue("ferry", server=False)
    key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(issued.certificate.read_bytes())
    store = tmp_path / "ferry.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"ferry",
            key,  # type: ignore[arg-type]
            cert,
            None,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    config = _load(
        tmp_path,
        f"A.ssl.keystore.type = PKCS12\nA.ssl.keystore.location = {store}\n"
        "A.ssl.keystore.password = secret\nA.ssl.key.password = secret\n",
    )
    settings = config.clusters["A"].admin_config()
    assert settings["ssl.keystore.location"] == str(store)
    assert settings["ssl.keystore.password"] == "secret"
    assert "ssl.keystore.type" not in settings


def test_a_pem_keystore_file_is_the_key_and_the_certificate(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    issued = ca.issue("ferry", server=False)
    config = _load(
        tmp_path,
        f"A.ssl.keystore.type = PEM\nA.ssl.keystore.location = {issued.keystore}\n",
    )
    settings = config.clusters["A"].consumer_config()
    assert settings["ssl.key.location"] == str(issued.keystore)
    assert settings["ssl.certificate.location"] == str(issued.keystore)


def test_inline_pem_stores_become_librdkafkas_pem_strings(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "A.ssl.truststore.type = PEM\nA.ssl.truststore.certificates = CA\n"
        "A.ssl.keystore.type = PEM\nA.ssl.keystore.key = KEY\n"
        "A.ssl.keystore.certificate.chain = CHAIN\n",
    )
    settings = config.clusters["A"].consumer_config()
    assert (settings["ssl.ca.pem"], settings["ssl.key.pem"]) == ("CA", "KEY")
    assert settings["ssl.certificate.pem"] == "CHAIN"


def test_an_inline_key_without_its_chain_names_the_missing_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "A.ssl.keystore.key = KEY\n")
    assert "ssl.keystore.certificate.chain is needed too" in str(info.value)


def test_top_level_stores_apply_to_every_cluster_as_in_mm2(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    config = _load(
        tmp_path,
        f"ssl.truststore.type = PEM\nssl.truststore.location = {ca.certificate}\n"
        "security.protocol = SSL\n",
    )
    for alias in ("A", "B"):
        assert config.clusters[alias].consumer_config()["ssl.ca.location"] == str(ca.certificate)


def test_an_empty_endpoint_identification_algorithm_turns_host_checks_off(tmp_path: Path) -> None:
    config = _load(tmp_path, "A.ssl.endpoint.identification.algorithm =\n")
    assert config.clusters["A"].consumer_config()["ssl.endpoint.identification.algorithm"] == "none"


def test_store_formats_are_told_apart_by_their_bytes(ca: CertificateAuthority) -> None:
    assert sniff_store(ca.certificate.read_bytes()) == "PEM"
    assert sniff_store(b"\xfe\xed\xfe\xed rest") == "JKS"
    assert sniff_store(b"\x30\x82\x01\x00") == "PKCS12"
    assert sniff_store(b"hello") is None


def test_a_store_password_without_its_store_is_refused_not_dropped(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, "A.ssl.truststore.password = changeit\n")
    message = str(info.value)
    assert "key 'A.ssl.truststore.password'" in message
    assert "ssl.truststore.location is not" in message
    assert "changeit" not in message
