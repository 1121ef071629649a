"""Protected remote topics: until a failover, only ferry writes a flow's copies (pure, no I/O).

On the target, `A.orders` would accept writes from any principal allowed to write there, and
a stray producer's records would sit among the copies (the audit counts them as foreign, after
the fact). So, where the target has an authorizer (`protect.remote.topics`, on by default),
each principal holding an ALLOW WRITE or ALL that covers a remote topic (by a literal, prefixed
or `*` ACL), ferry's own principal excepted, gets a literal DENY WRITE on it, any host: the
rule the switchover's fence uses on the source (`writer_fence`), since Kafka's authorizer
lets a DENY win over any ALLOW and a DENY for `User:*` would stop ferry too. A topic that
`User:*` may write cannot be protected that way, and is named.

`ferry failover flow`, `ferry failover group` (for the group's topics) and `ferry
switchover` lift the protection as their first step: recorded in the flow's control record
(`FlowControl.lifted`), so a running `ferry run` stops protecting those topics, and the
DENYs taken back (`lifted_denies`: the DENY WRITE entries of the principals that hold an
ALLOW WRITE there, which are the ones protection creates). A switchover back to the flow
clears the record, and protection applies again.

Only where remote topics have names of their own: under the identity policy a remote topic
is the target's topic of the same name, which the target's own producers write (active/active,
aggregation), so there is nothing to protect apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ferry.flows.switchover import EVERYONE, WRITE_OPERATIONS, AclEntry, writer_fence

__all__ = ["Protection", "lifted_denies", "protection", "remote_topics_of"]


@dataclass(frozen=True)
class Protection:
    denies: tuple[tuple[str, str], ...]  # (topic, principal): DENY WRITE to create
    unprotectable: tuple[str, ...]  # sentences: topics `User:*` may write


def remote_topics_of(
    topics: Iterable[str],
    source: str,
    topic_source: Callable[[str], str | None],
    upstream_topic: Callable[[str], str | None],
    accepts: Callable[[str], bool],
    internal: Callable[[str], bool],
) -> list[str]:
    """The target's topics that are remote topics of a flow from `source`: named by the
    policy as copies from it, of a topic the flow takes; internal topics left out."""
    out = []
    for topic in topics:
        if internal(topic) or topic_source(topic) != source:
            continue
        upstream = upstream_topic(topic)
        if upstream is not None and accepts(upstream):
            out.append(topic)
    return sorted(out)


def protection(
    acls: Iterable[AclEntry], topics: Iterable[str], ferry_principal: str, cluster: str
) -> Protection:
    """The DENY WRITE ACLs missing for `topics` to be written by ferry alone."""
    entries = list(acls)
    denies: set[tuple[str, str]] = set()
    unprotectable: list[str] = []
    for topic in sorted(set(topics)):
        fence = writer_fence(entries, [topic], ferry_principal, cluster)
        if fence.refusal is not None:
            unprotectable.append(
                f"remote topic {topic} on {cluster} is not protected: every principal may "
                f"write it (an ALLOW WRITE or ALL ACL for {EVERYONE}), and a DENY for "
                f"{EVERYONE} would stop ferry too; grant WRITE per principal"
            )
            continue
        denies |= {(acl.topic, acl.principal) for acl in fence.acls}
    return Protection(tuple(sorted(denies)), tuple(unprotectable))


def lifted_denies(
    acls: Iterable[AclEntry], topics: Iterable[str], ferry_principal: str | None
) -> list[tuple[str, str]]:
    """The DENY WRITE ACLs a lift takes back on `topics`: literal, on the topic, for a
    principal (not ferry) that holds an ALLOW WRITE or ALL covering it."""
    entries = list(acls)
    wanted = set(topics)
    out = set()
    for deny in entries:
        if (
            deny.permission != "DENY"
            or deny.pattern != "LITERAL"
            or deny.operation != "WRITE"
            or deny.name not in wanted
            or deny.principal == ferry_principal
        ):
            continue
        if any(
            e.permission == "ALLOW"
            and e.operation in WRITE_OPERATIONS
            and e.principal == deny.principal
            and e.covers(deny.name)
            for e in entries
        ):
            out.add((deny.name, deny.principal))
    return sorted(out)
