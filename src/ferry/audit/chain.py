"""End to end over a chain of flows (A->B->C): the first cluster's topics against the last's.

Every copy keeps the first hop's `ferry.origin` header, so the audit's rules (diff.py) hold
unchanged between A's `orders` and its copy two hops on (`B.A.orders` on C under the default
policy). Only "in flight" needs the chain: a record is in flight while any hop has not passed
it. Each hop's replicated position is an offset in its own source topic (B's `A.orders` for
B->C); the record there carries the A offset it copies, so the hop's position in A's offsets
is that record's origin offset. The chain's position is the lowest over the hops; a hop whose
position is at its source's end (read before) holds nothing back.

Read in this order, as for one flow: each hop's positions before the ends read after them, so
nothing copied while the audit reads is taken for lost.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from confluent_kafka import TopicPartition

from ferry.audit.model import FlowPlan, TopicPlan
from ferry.audit.plan import offsets_of, plan_flow
from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import ConfigError
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.ops.status import replicated_positions

__all__ = ["chain_flows", "plan_chain"]

# Records read past a hop's position looking for one that copies the first cluster's record
# (an aborted transaction's or someone else's records may sit there).
LOOK_AHEAD = 1000


def chain_flows(flows: Iterable[FlowConfig], name: str) -> list[FlowConfig]:
    """The flows `name` passes through, in order: "A->B->C" the enabled flows A->B and B->C;
    "A->B" that flow if enabled, else the one chain of enabled flows leading there, else the
    flow anyway (what it copied when it ran). Pure; raises ConfigError naming what is
    missing or ambiguous."""
    configured = {(f.source, f.target): f for f in flows}
    enabled = {pair: f for pair, f in configured.items() if f.enabled}
    hops = [part.strip() for part in name.split("->")]
    if len(hops) < 2 or any(not hop for hop in hops):
        raise ConfigError(f"--flow {name!r}: expected SOURCE->TARGET or A->B->C")
    direct = (hops[0], hops[1]) if len(hops) == 2 else None
    if direct in enabled:
        return [enabled[direct]]
    if direct is not None:
        paths = _paths(enabled, *direct)
        if not paths and direct in configured:
            return [configured[direct]]  # a flow not running now: what it copied before
        if len(paths) != 1:
            found = "no chain of enabled flows" if not paths else f"{len(paths)} chains"
            listed = "; ".join("->".join(p) for p in paths)
            raise ConfigError(
                f"--flow {name!r}: no enabled flow {hops[0]}->{hops[1]}, and {found} leads "
                f"there{': ' + listed if listed else ''}; name the chain, e.g. A->B->C"
            )
        hops = paths[0]
    chain = []
    for source, target in itertools.pairwise(hops):
        if (source, target) not in enabled:
            raise ConfigError(f"--flow {name!r}: the flow {source}->{target} is not enabled")
        chain.append(enabled[(source, target)])
    return chain


def _paths(enabled: dict[tuple[str, str], FlowConfig], start: str, end: str) -> list[list[str]]:
    found: list[list[str]] = []

    def walk(path: list[str]) -> None:
        for source, target in sorted(enabled):
            if source == path[-1] and target not in path:
                if target == end:
                    found.append([*path, target])
                else:
                    walk([*path, target])

    walk([start])
    return found


def plan_chain(
    config: FerryConfig, chain: list[FlowConfig], topics: str, timeout: float = 10.0
) -> FlowPlan:
    """What to read for the chain: the first flow's topics on its source against their copies
    on the last flow's target, with the chain's positions (in the first cluster's offsets)."""
    plan = plan_flow(config, chain[0], topics, timeout)
    if len(chain) == 1:
        return plan
    first = config.clusters[chain[0].source]
    stream = f"{plan.source_cluster_id}|{first.alias}"
    for flow in chain[1:]:
        plan = _next_hop(config, plan, flow, stream, timeout)
    name = "->".join([chain[0].source, *(f.target for f in chain)])
    return replace(plan, name=name)


def _next_hop(
    config: FerryConfig, plan: FlowPlan, flow: FlowConfig, stream: str, timeout: float
) -> FlowPlan:
    """`plan` (first cluster -> X) extended by `flow` (X -> Y)."""
    here, there = config.clusters[flow.source], config.clusters[flow.target]
    policy = flow.replication_policy
    selector = TopicSelector(flow, policy)
    # A topic this hop does not select never reaches Y: nothing to audit end to end.
    carried = [t for t in plan.topics if selector.accepts(t.remote_topic)]
    parts = [(t.remote_topic, p) for t in carried for p in t.remote]
    positions = replicated_positions(there, flow, parts, timeout)
    admin = clients.admin_client(there.admin_config())
    with kafka_errors(there, "list topics"):
        topics_there = admin.list_topics(timeout=timeout).topics
    hops: list[TopicPlan] = []
    for t in carried:
        next_name = policy.remote_topic(flow.source, t.remote_topic)
        md = topics_there.get(next_name)
        next_parts = [(next_name, p) for p in md.partitions] if md and md.error is None else []
        chain_positions: dict[int, int] = {}
        for p, before in t.positions.items():
            at = positions.get((t.remote_topic, p))
            if at is None:
                continue  # the hop copied nothing of it yet: all in flight
            end = t.remote.get(p, (0, 0))[1]
            first_offset = (
                before
                if at >= end
                else _origin_offset(here, t.remote_topic, p, at, f"{stream}|{p}|{t.topic}")
            )
            chain_positions[p] = min(before, before if first_offset is None else first_offset)
        hops.append(
            TopicPlan(
                t.topic,
                next_name,
                t.source,
                {p: o for (_, p), o in offsets_of(admin, there, next_parts, timeout).items()},
                chain_positions,
            )
        )
    return FlowPlan(plan.name, plan.source, there, plan.source_cluster_id, hops)


def _origin(headers: Any) -> Origin | None:
    for key, value in headers:
        if key == ORIGIN_HEADER and isinstance(value, bytes):
            try:
                return Origin.from_bytes(value)
            except (ValueError, UnicodeDecodeError):
                return None  # not ferry's: someone else's record
    return None


def _origin_offset(
    cluster: ClusterConfig, topic: str, partition: int, offset: int, stream: str
) -> int | None:
    """The first cluster's offset that the record at (or first after) `offset` copies; None
    when none of the next LOOK_AHEAD committed records is a copy from `stream`."""
    consumer = clients.consumer(
        {**cluster.consumer_config(), "group.id": f"ferry-audit-{uuid.uuid4().hex}"}
    )
    try:
        with kafka_errors(cluster, f"read {topic} partition {partition} from offset {offset}"):
            consumer.assign([TopicPartition(topic, partition, offset)])
            seen = 0
            while seen < LOOK_AHEAD:
                batch = consumer.consume(500, 5.0)
                if not batch:
                    return None
                for message in batch:
                    if message.error() is not None:
                        continue
                    seen += 1
                    origin = _origin(message.headers() or [])
                    if origin is not None and stream == (
                        f"{origin.cluster_id}|{origin.alias}|{origin.partition}|{origin.topic}"
                    ):
                        return origin.offset
            return None
    finally:
        consumer.close()
