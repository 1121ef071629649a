"""One cluster's topic ACLs, as a switchover's fence and the protection of remote topics read
and write them.

The fence denies WRITE on the fenced topics to every principal that may write them
(control/switchover.py); its reverse allows those principals to write the copies on the other
side. Remote topics are protected the same way until a failover lifts it
(sync/topic_protection.py, control/protection.py). All go through this client: literal topic
ACLs on any host, each request bounded by the caller's timeout, and errors that name the
cluster and the permission ferry's principal lacks (for `purpose`). A cluster without an
authorizer is told apart (NoAuthorizer): there is nothing to fence with, and the caller says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__: not re-exported
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError
from ferry.flows.switchover import AclEntry
from ferry.kafka import clients
from ferry.kafka.controller import ControllerRequests
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable

__all__ = [
    "PROBE_ACL",
    "NoAuthorizer",
    "TopicAcls",
    "every_topic_acl",
    "ferry_principal",
    "means_no_authorizer",
]

# (topic, principal) of a DENY WRITE that matches nothing: created and deleted at once to
# learn whether a cluster has an authorizer.
PROBE_ACL = ("ferry-switchover-probe", "User:ferry-switchover-probe")


def every_topic_acl(pattern_type: str = "ANY") -> AclBindingFilter:
    """A describe-ACLs filter for every topic ACL of `pattern_type` (ANY, LITERAL, PREFIXED),
    whatever its name, principal, host, operation and permission."""
    return AclBindingFilter(
        ResourceType.TOPIC,
        None,  # type: ignore[arg-type]  # None matches any name (the stubs say str; librdkafka takes NULL)
        ResourcePatternType[pattern_type],
        None,  # type: ignore[arg-type]  # any principal
        None,  # type: ignore[arg-type]  # any host
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def means_no_authorizer(error: KafkaError | None) -> bool:
    """The broker's answer when it has no ACL authorizer: there are no ACLs to read or keep."""
    return error is not None and error.code() == KafkaError.SECURITY_DISABLED


_EVERY_TOPIC_ACL = every_topic_acl()


class NoAuthorizer(Exception):
    """The cluster has no ACL authorizer (its alias is the message)."""


class TopicAcls:
    """One cluster's topic ACLs."""

    def __init__(
        self, cluster: ClusterConfig, timeout: float, purpose: str = "a switchover's fence"
    ) -> None:
        self.cluster = cluster
        self._timeout = timeout
        self._purpose = purpose
        # ACL requests go to the controller: asked again if the one librdkafka drew is down.
        self._requests = ControllerRequests(clients.admin_client(cluster.admin_config()), timeout)

    @property
    def admin(self) -> Any:
        """The cluster's admin client, for the caller's other reads of it."""
        return self._requests.client

    def _wait(self, request: Callable[[Any], Iterable[Any]], action: str) -> list[Any]:
        """The results of the futures `request(admin client)` returns, each in turn."""

        def answers(admin: Any) -> list[Any]:
            return [future.result(self._timeout + 5) for future in request(admin)]

        try:
            return self._requests.ask(answers)
        except (KafkaException, TimeoutError) as exc:
            error = kafka_error_of(exc)
            if means_no_authorizer(error):
                raise NoAuthorizer(self.cluster.alias) from None
            if error is None or error.code() in UNREACHABLE_CODES:
                raise unavailable(self.cluster, exc) from None
            raise FerryError(
                f"cluster {self.cluster.alias}: could not {action}: {error.name()}: "
                f"{error.str()}; ferry's principal needs DESCRIBE and ALTER on the cluster "
                f"for {self._purpose}"
            ) from None

    def entries(self) -> list[AclEntry]:
        """Every topic ACL; raises NoAuthorizer without an authorizer."""
        (found,) = self._wait(
            lambda admin: [admin.describe_acls(_EVERY_TOPIC_ACL, request_timeout=self._timeout)],
            "read its ACLs",
        )
        return [
            AclEntry(
                b.resource_pattern_type.name,
                b.name,
                b.principal,
                b.operation.name,
                b.permission_type.name,
            )
            for b in found
        ]

    def has_authorizer(self, *, probe: bool = True) -> bool:
        """Whether the cluster has an ACL authorizer. A broker without one may answer
        describe-ACLs with an empty list instead of SECURITY_DISABLED, so with `probe` an ACL
        that matches nothing (PROBE_ACL) is created and deleted: refused with
        SECURITY_DISABLED there."""
        try:
            self.entries()
            if probe:
                self.create([PROBE_ACL], "DENY")
                self.delete([PROBE_ACL], "DENY")
        except NoAuthorizer:
            return False
        return True

    def create(self, acls: Iterable[tuple[str, str]], permission: str) -> None:
        bindings = [_write_acl(AclBinding, t, principal, permission) for t, principal in acls]
        if bindings:
            self._wait(
                lambda admin: admin.create_acls(bindings, request_timeout=self._timeout).values(),
                "create ACLs",
            )

    def delete(self, acls: Iterable[tuple[str, str]], permission: str) -> None:
        filters = [
            _write_acl(AclBindingFilter, topic, principal, permission) for topic, principal in acls
        ]
        if filters:
            self._wait(
                lambda admin: admin.delete_acls(filters, request_timeout=self._timeout).values(),
                "delete ACLs",
            )

    def literal_writes(self, permission: str) -> set[tuple[str, str]]:
        """(topic, principal) of each literal WRITE ACL with `permission` on any host."""
        return {
            (e.name, e.principal)
            for e in self.entries()
            if e.pattern == "LITERAL" and e.operation == "WRITE" and e.permission == permission
        }


def _write_acl(kind: type[Any], topic: str, principal: str, permission: str) -> Any:
    """A literal topic WRITE ACL on any host: the binding to create (`kind` AclBinding) or
    the filter that deletes exactly it (AclBindingFilter, same arguments)."""
    return kind(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        AclOperation.WRITE,
        AclPermissionType[permission],
    )


def ferry_principal(cluster: ClusterConfig) -> str | None:
    """The principal ferry's clients authenticate as, where the settings say it (SASL PLAIN
    or SCRAM: `User:<sasl.username>`); None otherwise (TLS or Kerberos name it elsewhere)."""
    settings = cluster.admin_config()
    mechanism = settings.get("sasl.mechanism", settings.get("sasl.mechanisms", "")).upper()
    username = settings.get("sasl.username")
    if username and (mechanism == "PLAIN" or mechanism.startswith("SCRAM")):
        return f"User:{username}"
    return None
