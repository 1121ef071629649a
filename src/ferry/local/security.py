"""Secure local clusters: TLS listeners, SCRAM users and an ACL authorizer, as production runs.

`sasl_ssl`: clients connect over TLS and log in with SCRAM-SHA-512; `ssl`: mutual TLS, the
client's certificate is its identity. Either way there are two principals, `admin` (a super
user: creates topics, grants ACLs) and `ferry`, which gets exactly the ACLs
`ferry.ops.permissions` lists for a source and a target, so a ferry run with its settings
proves that list is enough.

The controller listener is TLS with client certificates too, and the broker's own certificate
(`broker-<alias>`) is a super user: nothing on a secure local cluster listens in plain text.
Principals are the certificate's common name (`ssl.principal.mapping.rules`), so mutual TLS
has the same `User:admin` and `User:ferry` as SCRAM.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from ferry.local.certificates import CertificateAuthority

__all__ = ["ADMIN", "FERRY", "MODES", "ClusterSecurity", "SecurityMode", "prepare"]

SecurityMode = Literal["plaintext", "sasl_ssl", "ssl"]
MODES: tuple[str, ...] = get_args(SecurityMode)
ADMIN, FERRY = "admin", "ferry"
SCRAM = "SCRAM-SHA-512"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@dataclass(frozen=True)
class ClusterSecurity:
    """What one secure cluster needs: broker settings, storage format arguments (SCRAM users
    exist from the first start), and the librdkafka settings of each principal."""

    mode: SecurityMode
    broker: dict[str, str] = field(default_factory=dict)
    format_args: tuple[str, ...] = ()
    ferry: dict[str, str] = field(default_factory=dict)
    admin: dict[str, str] = field(default_factory=dict)


def _tls_broker(alias: str, ca: CertificateAuthority, listener: str) -> dict[str, str]:
    broker = ca.issue(f"broker-{alias}", server=True)
    return {
        "listeners": f"{listener}://127.0.0.1:{{port}},CONTROLLER://127.0.0.1:{{controller_port}}",
        "advertised.listeners": f"{listener}://127.0.0.1:{{port}}",
        "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:SSL",
        "inter.broker.listener.name": listener,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.certificate),
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:broker-{alias}",
        "allow.everyone.if.no.acl.found": "false",
    }


def prepare(mode: SecurityMode, alias: str, directory: Path) -> ClusterSecurity:
    """Certificates (under `directory/tls`, one CA shared by every cluster there) and fresh
    passwords for cluster `alias`."""
    if mode == "plaintext":
        return ClusterSecurity(mode)
    ca = CertificateAuthority.open(directory / "tls")
    tls = {"ssl.ca.location": str(ca.certificate)}
    if mode == "ssl":
        broker = {**_tls_broker(alias, ca, "SSL"), "ssl.client.auth": "required"}
        principals = {}
        for name in (ADMIN, FERRY):
            cert = ca.issue(name, server=False)
            principals[name] = {
                "security.protocol": "SSL",
                **tls,
                "ssl.certificate.location": str(cert.certificate),
                "ssl.key.location": str(cert.key),
            }
        return ClusterSecurity(mode, broker, (), principals[FERRY], principals[ADMIN])

    passwords = {name: secrets.token_hex(16) for name in (ADMIN, FERRY)}
    broker = {
        **_tls_broker(alias, ca, "SASL_SSL"),
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": (
            f'{_SCRAM_MODULE} required username="{ADMIN}" password="{passwords[ADMIN]}";'
        ),
    }
    format_args = tuple(
        f"--add-scram={SCRAM}=[name={name},password={password}]"
        for name, password in passwords.items()
    )
    clients = {
        name: {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM,
            "sasl.username": name,
            "sasl.password": password,
            **tls,
        }
        for name, password in passwords.items()
    }
    return ClusterSecurity(mode, broker, format_args, clients[FERRY], clients[ADMIN])


def grant_ferry_acls(bootstrap: str, admin: dict[str, str], timeout: float = 30.0) -> None:
    """Give `User:ferry` what a source and a target need (`ferry.ops.permissions`), nothing
    more; create_acls is idempotent, so a cluster kept running is granted again harmlessly."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__: not re-exported
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from ferry.kafka import clients
    from ferry.ops.permissions import permissions_for

    bindings = [
        AclBinding(
            # librdkafka calls Kafka's CLUSTER resource BROKER (its name is kafka-cluster).
            ResourceType["BROKER" if row.resource == "CLUSTER" else row.resource],
            row.name,
            ResourcePatternType[row.pattern],
            f"User:{FERRY}",
            "*",
            AclOperation[row.operation],
            AclPermissionType.ALLOW,
        )
        for row in permissions_for("source", "target")
    ]
    client = clients.admin_client({**admin, "bootstrap.servers": bootstrap, "log_level": 0})
    for future in client.create_acls(bindings, request_timeout=timeout).values():
        future.result()
