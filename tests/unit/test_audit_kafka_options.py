"""The audit's Spark Kafka connector (a Java client) gets the security settings of ferry's
librdkafka clients in Java's spelling."""

from __future__ import annotations

import re
from pathlib import Path

from ferry.audit.kafka_options import kafka_options
from ferry.config.model import ClusterConfig
from ferry.local.security import prepare
from ferry.secrets import SPARK_OPTIONS_REDACTION_REGEX, redact


def test_scram_over_tls_becomes_a_jaas_line_and_a_pem_truststore(tmp_path: Path) -> None:
    ferry = prepare("sasl_ssl", "A", tmp_path).ferry
    options = kafka_options(ClusterConfig(alias="A", bootstrap_servers="h:1", common=ferry))
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="ferry" password="{ferry["sasl.password"]}";'
    )
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.location"] == ferry["ssl.ca.location"]


def test_a_client_certificate_becomes_a_pem_keystore_of_key_and_chain(tmp_path: Path) -> None:
    ferry = prepare("ssl", "A", tmp_path).ferry
    options = kafka_options(ClusterConfig(alias="A", bootstrap_servers="h:1", common=ferry))
    assert options["kafka.security.protocol"] == "SSL"
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.key"] == Path(ferry["ssl.key.location"]).read_text()
    assert options["kafka.ssl.keystore.certificate.chain"] == (
        Path(ferry["ssl.certificate.location"]).read_text()
    )
    assert "kafka.sasl.jaas.config" not in options
    # The key read from its file is a secret: masked in ferry's output and in Spark's.
    key_text = options["kafka.ssl.keystore.key"]
    assert "[hidden]" in redact(f"option value {key_text}")
    assert key_text not in redact(f"option value {key_text}")
    assert re.search(SPARK_OPTIONS_REDACTION_REGEX, "kafka.ssl.keystore.key")


def test_a_pkcs12_keystore_and_no_host_check_keep_their_meaning() -> None:
    common = {
        "security.protocol": "SSL",
        "ssl.ca.pem": "CA",
        "ssl.keystore.location": "/k.p12",
        "ssl.keystore.password": "pw",
        "ssl.endpoint.identification.algorithm": "none",
    }
    options = kafka_options(ClusterConfig(alias="A", bootstrap_servers="h:1", common=common))
    assert options["kafka.ssl.truststore.certificates"] == "CA"
    assert options["kafka.ssl.keystore.type"] == "PKCS12"
    assert options["kafka.ssl.keystore.location"] == "/k.p12"
    assert options["kafka.ssl.keystore.password"] == "pw"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
