"""Protected remote topics, kept while ferry runs (`A->B.protect.remote.topics`).

Every `PROTECT_INTERVAL_SECONDS`, the target's topics and topic ACLs are read and each remote
topic of the flow that its control record has not lifted gets the DENY WRITE ACLs it lacks
(the rule is `ferry.flows.protection`): a topic ferry just created is protected within that
interval, and so is a principal granted WRITE on it since. Said once and stopped: a target
without an authorizer, an identity policy (remote topics share the target's own names),
or a ferry principal the settings do not name (SASL PLAIN or SCRAM name it; with mutual TLS
or Kerberos ferry cannot tell its own principal from a stray writer's).
"""

from __future__ import annotations

from collections.abc import Callable

from ferry.config.model import FerryConfig, FlowConfig
from ferry.flows.override import FlowControl
from ferry.flows.protection import protection, remote_topics_of
from ferry.graph.selection import TopicSelector
from ferry.kafka.errors import kafka_errors
from ferry.kafka.topic_acls import NoAuthorizer, TopicAcls, ferry_principal
from ferry.policy import IdentityPolicy
from ferry.sync.checkpoints import SyncReport

__all__ = ["PROTECT_INTERVAL_SECONDS", "PURPOSE", "RemoteTopicProtection"]

PROTECT_INTERVAL_SECONDS = 10
PURPOSE = "protected remote topics (or set protect.remote.topics = false)"


class RemoteTopicProtection:
    def __init__(
        self,
        config: FerryConfig,
        flow: FlowConfig,
        control: Callable[[], FlowControl] | None = None,
        *,
        timeout: float = 15.0,
    ) -> None:
        self.flow = flow
        self.target = config.clusters[flow.target]
        self.policy = flow.replication_policy
        self.selector = TopicSelector(flow, self.policy)
        self._control = control or FlowControl
        self._timeout = timeout
        self._acls = TopicAcls(self.target, timeout, PURPOSE)
        self._principal = ferry_principal(self.target)
        self.off: str | None = None  # why protection stopped, once it has
        if isinstance(self.policy, IdentityPolicy):
            self.off = (
                f"remote topics of {flow.name} on {flow.target} are not protected: under the "
                f"identity policy they are {flow.target}'s own topics of the same name"
            )
        self._checked = False  # the target's authorizer and ferry's principal looked at
        self._said = False
        self._unprotectable: set[str] = set()

    def protect(self) -> SyncReport:
        """One round: the DENYs missing on the flow's remote topics created."""
        if self.off is None and not self._checked:
            self.off = self._unprotectable_flow()
            self._checked = self.off is None
        if self.off is not None:
            return self._once()
        control = self._control()
        admin = self._acls.admin
        with kafka_errors(self.target, "list topics"):
            names = list(admin.list_topics(timeout=self._timeout).topics)
        topics = [
            t
            for t in remote_topics_of(
                names,
                self.flow.source,
                self.policy.topic_source,
                self.policy.upstream_topic,
                self.selector.accepts,
                self.policy.is_internal_topic,
            )
            if control.protected(t)
        ]
        if not topics:
            return SyncReport()
        assert self._principal is not None
        try:
            wanted = protection(self._acls.entries(), topics, self._principal, self.target.alias)
            # Looked at again just before writing: a lift recorded meanwhile wins.
            fresh = self._control()
            denies = [(t, p) for t, p in wanted.denies if fresh.protected(t)]
            self._acls.create(denies, "DENY")
        except NoAuthorizer:
            self.off = (
                f"remote topics of {self.flow.name} on {self.target.alias} are not protected: "
                f"cluster {self.target.alias} has no ACL authorizer"
            )
            return self._once()
        new = tuple(s for s in wanted.unprotectable if s not in self._unprotectable)
        self._unprotectable |= set(new)  # each said once, not every round
        return SyncReport(len(topics), len(denies), new)

    def _unprotectable_flow(self) -> str | None:
        """Why none of the flow's remote topics can be protected (said once), or None."""
        where = f"remote topics of {self.flow.name} on {self.target.alias} are not protected"
        if not self._acls.has_authorizer():
            return f"{where}: cluster {self.target.alias} has no ACL authorizer"
        if self._principal is None:
            return (
                f"{where}: ferry's principal there is not named by its settings (SASL PLAIN "
                "or SCRAM name it), so a DENY could stop ferry itself; set "
                "protect.remote.topics = false to say so"
            )
        return None

    def _once(self) -> SyncReport:
        if self._said:
            return SyncReport()
        self._said = True
        return SyncReport(0, 0, (self.off or "",))
