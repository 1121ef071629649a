"""Lifting the protection of a flow's remote topics: the first step of a failover or switchover.

Until then only ferry may write `A.orders` on B (ferry.flows.protection, kept by
sync/topic_protection.py in `ferry run`). Applications that fail over to B write there, so
`ferry failover flow` (every remote topic), `ferry failover group` (the group's topics)
and `ferry switchover` (in its reverse step) lift it:
1. recorded in the flow's control record (`FlowControl.lifted`), first: a running `ferry
   run` stops protecting those topics within seconds, and a command cut short and run again
   finds the record (lifting twice changes nothing);
2. the protection's DENY WRITE ACLs taken back on the target; where some were, one more look
   after `SETTLE_SECONDS`, since a protection round that read the control record just before
   step 1 may have created one meanwhile.
A target without an authorizer, or a flow whose topics are never protected (the setting off,
the identity policy), has nothing to lift and nothing is recorded. A lift the target refuses
(ferry's principal lacks DESCRIBE or ALTER on its cluster) is said, and the command goes on:
moving the groups matters more. A switchover back to the flow clears the
record (control/switchover.py), and protection applies again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ferry.config.model import FerryConfig, FlowConfig
from ferry.control.log import ControlLog, control_place
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.flows.protection import lifted_denies, remote_topics_of
from ferry.graph.selection import TopicSelector
from ferry.kafka.errors import kafka_errors
from ferry.kafka.topic_acls import NoAuthorizer, TopicAcls, ferry_principal
from ferry.policy import IdentityPolicy

__all__ = ["SETTLE_SECONDS", "lift_protection"]

SETTLE_SECONDS = 5.0  # more than a running ferry run takes to follow its control record (2 s)
PURPOSE = "lifting the protection of remote topics (DESCRIBE and ALTER on the target cluster)"


def lift_protection(
    config: FerryConfig,
    flow: FlowConfig,
    topics: frozenset[str] | None,
    say: Callable[[str], None],
    *,
    timeout: float = 15.0,
    settle: float = SETTLE_SECONDS,
) -> list[tuple[str, str]]:
    """Lift flow `flow`'s protection on `topics` (remote names; None: every remote topic).
    Returns the (topic, principal) DENY WRITE ACLs taken back."""
    try:
        return _lift(config, flow, topics, say, timeout, settle)
    except KafkaUnavailableError:
        raise
    except FerryError as exc:
        say(f"warning: the protection of {flow.name}'s remote topics was not lifted: {exc}")
        return []


def _lift(
    config: FerryConfig,
    flow: FlowConfig,
    topics: frozenset[str] | None,
    say: Callable[[str], None],
    timeout: float,
    settle: float,
) -> list[tuple[str, str]]:
    policy = flow.replication_policy
    if not flow.protect_remote_topics or isinstance(policy, IdentityPolicy):
        return []  # never protected (sync/topic_protection.py): nothing to lift or record
    target = config.clusters[flow.target]
    acls = TopicAcls(target, timeout, PURPOSE)
    if not acls.has_authorizer():
        return []
    alias, topic = control_place(config, flow)
    log = ControlLog(config.clusters[alias], topic, timeout=timeout)
    try:
        control = log.read().get(flow.name, FlowControl())
        lifted = control.lift(topics)
        if lifted != control:
            log.write(flow.name, lifted)
    finally:
        log.close()
    principal = ferry_principal(target)
    try:
        if topics is None:
            with kafka_errors(target, "list topics"):
                names = list(acls.admin.list_topics(timeout=timeout).topics)
            topics = frozenset(
                remote_topics_of(
                    names,
                    flow.source,
                    policy.topic_source,
                    policy.upstream_topic,
                    TopicSelector(flow, policy).accepts,
                    policy.is_internal_topic,
                )
            )
        taken = _take_back(acls, topics, principal)
        if taken:
            time.sleep(settle)  # a protection round already past its last look (see above)
            taken += _take_back(acls, topics, principal)
    except NoAuthorizer:
        return []
    for remote, who in taken:
        say(f"protection lifted: DENY WRITE for {who} on {remote} ({target.alias}) taken back")
    return taken


def _take_back(
    acls: TopicAcls, topics: frozenset[str], principal: str | None
) -> list[tuple[str, str]]:
    gone = lifted_denies(acls.entries(), topics, principal)
    acls.delete(gone, "DENY")
    return gone
