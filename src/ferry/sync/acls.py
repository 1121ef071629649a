"""ACL sync (MM2's `sync.topic.acls.enabled`): who may read a topic follows it to the target.

A standby cluster whose remote topics nobody may read is useless the day consumers fail over.
Every `sync.topic.acls.interval.seconds`, the source's literal topic ACLs of replicated topics
are read, turned into the remote topics' ACLs (`ferry.sync.acl_rules`) and the missing
ones created on the target. A cluster without an authorizer has no ACLs to copy or keep:
the sync says so once and stops asking.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # no __all__: not re-exported
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import FerryError
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_ACLS_PER_REQUEST, submit
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, unavailable
from ferry.kafka.topic_acls import every_topic_acl, means_no_authorizer
from ferry.sync.acl_rules import TopicAcl, remote_acls
from ferry.sync.checkpoints import SyncReport

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["AclSync"]

_EVERY_LITERAL_TOPIC_ACL = every_topic_acl("LITERAL")


class _NoAuthorizer(Exception):
    pass


class AclSync:
    def __init__(self, config: FerryConfig, flow: FlowConfig, *, timeout: float = 15.0) -> None:
        self.flow = flow
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.replication_policy
        self.selector = TopicSelector(flow, self.policy)
        self._timeout = timeout
        self._source_admin = clients.admin_client(self.source.admin_config())
        self._target_admin = clients.admin_client(self.target.admin_config())
        self.off: str | None = None  # why the sync stopped, once it has

    def sync(self) -> SyncReport:
        if self.off is not None:
            return SyncReport()
        try:
            source = self._describe(self.source, self._source_admin)
            wanted = remote_acls(
                source,
                self.selector.accepts,
                lambda topic: self.policy.remote_topic(self.flow.source, topic),
            )
            if not wanted:
                return SyncReport()
            missing = sorted(wanted - self._describe(self.target, self._target_admin))
        except _NoAuthorizer as exc:
            self.off = f"ACL sync is off: {exc}"
            return SyncReport(0, 0, (self.off,))
        return SyncReport(len(wanted), self._create(missing))

    def _describe(self, cluster: ClusterConfig, admin: AdminClient) -> set[TopicAcl]:
        future = admin.describe_acls(_EVERY_LITERAL_TOPIC_ACL, request_timeout=self._timeout)
        try:
            bindings = future.result(self._timeout + 5)
        except (KafkaException, TimeoutError) as exc:
            raise self._failure(cluster, exc, "read the ACLs") from None
        return {
            TopicAcl(b.name, b.principal, b.host, b.operation.name, b.permission_type.name)
            for b in bindings
        }

    def _create(self, acls: list[TopicAcl]) -> int:
        if not acls:
            return 0
        bindings = [
            AclBinding(
                ResourceType.TOPIC,
                acl.topic,
                ResourcePatternType.LITERAL,
                acl.principal,
                acl.host,
                AclOperation[acl.operation],
                AclPermissionType[acl.permission],
            )
            for acl in acls
        ]
        futures = submit(
            lambda batch: self._target_admin.create_acls(batch, request_timeout=self._timeout),
            bindings,
            MAX_ACLS_PER_REQUEST,
        )
        for binding, future in futures.items():
            try:
                future.result(self._timeout + 5)
            except (KafkaException, TimeoutError) as exc:
                action = f"create ACLs of topic {binding.name}"
                raise self._failure(self.target, exc, action) from None
        return len(bindings)

    def _failure(self, cluster: ClusterConfig, exc: BaseException, action: str) -> Exception:
        error = kafka_error_of(exc)
        if error is None or error.code() in UNREACHABLE_CODES:
            return unavailable(cluster, exc)
        if means_no_authorizer(error):
            return _NoAuthorizer(f"cluster {cluster.alias} has no authorizer (no ACLs to sync)")
        return FerryError(
            f"cluster {cluster.alias}: could not {action} for flow {self.flow.name}: "
            f"{error.name()}: {error.str()}; ferry's principal needs DESCRIBE on the source "
            "cluster and ALTER on the target cluster for ACL sync "
            "(or set sync.topic.acls.enabled = false)"
        )
