"""librdkafka client settings translated into the Java client options Spark's Kafka
connector takes (`kafka.`-prefixed): bootstrap, security protocol, SASL credentials as a JAAS
line, TLS trust and key stores as PEM or PKCS12."""

from __future__ import annotations

from pathlib import Path

from ferry.config.model import ClusterConfig
from ferry.secrets import register

__all__ = ["java_tls_options", "kafka_options"]


def kafka_options(cluster: ClusterConfig) -> dict[str, str]:
    """The Java client settings Spark's connector needs to reach `cluster` (librdkafka's
    security keys translated: protocol, SASL PLAIN/SCRAM credentials, a PEM CA file)."""
    conf = cluster.consumer_config()
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    for key in ("security.protocol", "sasl.mechanism"):
        if key in conf:
            options[f"kafka.{key}"] = conf[key]
    if "sasl.mechanisms" in conf:
        options["kafka.sasl.mechanism"] = conf["sasl.mechanisms"]
    if "sasl.username" in conf:
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if options.get("kafka.sasl.mechanism", "PLAIN").startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{conf["sasl.username"]}" '
            f'password="{conf.get("sasl.password", "")}";'
        )
    options.update({f"kafka.{key}": value for key, value in java_tls_options(conf).items()})
    return options


def java_tls_options(conf: dict[str, str]) -> dict[str, str]:
    """librdkafka's TLS settings as a Java client's: PEM trust and key stores (Java's Kafka
    client reads PEM since 2.7), a PKCS12 keystore as it is, host name checks."""
    java: dict[str, str] = {}
    if "ssl.ca.location" in conf:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = conf["ssl.ca.location"]
    elif "ssl.ca.pem" in conf:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.certificates"] = conf["ssl.ca.pem"]
    if "ssl.keystore.location" in conf:
        java["ssl.keystore.type"] = "PKCS12"
        java["ssl.keystore.location"] = conf["ssl.keystore.location"]
        if "ssl.keystore.password" in conf:
            java["ssl.keystore.password"] = conf["ssl.keystore.password"]
    elif "ssl.key.location" in conf or "ssl.key.pem" in conf:
        # Java's PEM keystore is one key and its chain, inline or in one file.
        java["ssl.keystore.type"] = "PEM"
        key_file, cert_file = conf.get("ssl.key.location"), conf.get("ssl.certificate.location")
        if key_file is not None and key_file == cert_file:
            java["ssl.keystore.location"] = key_file
        else:
            java["ssl.keystore.key"] = conf.get("ssl.key.pem") or Path(str(key_file)).read_text()
            register(java["ssl.keystore.key"])  # read from a file: no config key named it
            java["ssl.keystore.certificate.chain"] = (
                conf.get("ssl.certificate.pem") or Path(str(cert_file)).read_text()
            )
    if "ssl.key.password" in conf:
        java["ssl.key.password"] = conf["ssl.key.password"]
    if conf.get("ssl.endpoint.identification.algorithm") == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    return java
