"""Which source ACLs go to the target, and as what (MM2's rules). Pure code, no I/O.

Only literal topic ACLs of replicated topics travel, renamed to the remote topic. Nobody may
produce into a remote topic (only the replicator writes there), so ALLOW WRITE is dropped and
ALLOW ALL becomes ALLOW READ; DENY entries travel as they are. ACLs are created, never
deleted: an ACL someone made on the target stays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["TopicAcl", "remote_acls"]


@dataclass(frozen=True, order=True)
class TopicAcl:
    """One literal ACL entry on a topic (operation and permission as Kafka names them)."""

    topic: str
    principal: str
    host: str
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY


def remote_acls(
    source: Iterable[TopicAcl],
    accepts: Callable[[str], bool],
    remote_topic: Callable[[str], str],
) -> set[TopicAcl]:
    """The ACLs the target should hold for the remote topics of `source`'s topics."""
    out: set[TopicAcl] = set()
    for acl in source:
        if not accepts(acl.topic):
            continue
        operation = acl.operation
        if acl.permission == "ALLOW":
            if operation == "WRITE":
                continue
            if operation == "ALL":
                operation = "READ"
        out.add(
            TopicAcl(remote_topic(acl.topic), acl.principal, acl.host, operation, acl.permission)
        )
    return out
