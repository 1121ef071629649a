"""The replication graph as a whole: double routes, unsafe cycles, idle flows and clusters.

Pure code, no I/O. Each flow copies on its own; only the graph shows that one source topic
would reach the same remote topic by two paths, or go round a cycle forever.

How a record travels (what the copy engine does, per hop of an enabled flow X->Y):

- X->Y copies the topic named N on X when its selector accepts N (topics/topics.exclude,
  internal topics never, heartbeats always, and the policy's name-based cycle check: a name
  whose chain of sources, read by X->Y's policy, reaches Y is never copied to Y);
- the copy lands in Y's topic `policy.remote_topic(X, N)`;
- provenance: every copy carries `ferry.origin`, set at the first hop and never changed, and
  a record whose origin is Y is skipped, whatever the policy. So no record is ever copied into
  the cluster where it was produced.

The rule, as checked here: a route is a record's path from the cluster it was produced on.
It is **unsafe** when it reaches a cluster it has been in already; that can only happen on a
cycle of flows the record entered from outside (its origin is not on the cycle, so the origin
header never stops it) and whose names do not stop it either. Consequently:

- a cycle whose flows all use the prefix policy (or a rename format with `${source}`) is safe:
  each hop writes its source into the name and the next hop back refuses it;
- an identity-policy cycle is safe for records produced on the cycle (A<->B active/active:
  the origin header stops them after one lap) and unsafe as soon as a flow from outside feeds
  it topics its flows admit (C->A plus A<->B: C's records go A->B->A->B... forever);
- mixed policies are decided by following the names.

A **double route** is one source topic reaching the same (cluster, topic) by two paths: under
the identity policy A->B plus A->C->B, B's `orders` would get every record of A's `orders`
twice. The prefix policy never has one: distinct paths write distinct prefixes.

Topic names: `check_topics` follows the real names (each topic of each cluster as a possible
origin), which is what a running ferry knows. At load no names are known, so `check_config`
follows example names built from every enabled flow's `topics` patterns ('orders-.*' gives
`orders-` and `orders-any-topic`); an error names the example. Warnings: a cluster that no enabled
flow reads or writes, and an enabled flow that copies none of those example names (its
`topics.exclude`, the internal-topic rule or the cycle rule refuse every one of them).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from ferry.config.model import FerryConfig, FlowConfig
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.policy import ReplicationPolicy

__all__ = [
    "Finding",
    "Route",
    "TopologyReport",
    "check_config",
    "check_topics",
    "example_topics",
    "policy_label",
]

Kind = Literal["double-route", "unsafe-cycle", "idle-flow", "unused-cluster"]


@dataclass(frozen=True)
class Route:
    """A record's path: `clusters[i]` holds it in topic `topics[i]`; `clusters[0]` produced it."""

    clusters: tuple[str, ...]
    topics: tuple[str, ...]

    @property
    def path(self) -> str:
        return "->".join(self.clusters)


@dataclass(frozen=True)
class Finding:
    """One error or warning; `message` is a whole sentence naming clusters, flows and topics."""

    kind: Kind
    message: str
    origin: str | None = None  # the cluster the topic comes from (errors only)
    topic: str | None = None  # the topic's name there
    cluster: str | None = None  # where it goes wrong (or the unused cluster)
    remote_topic: str | None = None  # the topic there
    flow: str | None = None  # the idle flow
    routes: tuple[Route, ...] = ()  # the two paths an error names

    @property
    def is_error(self) -> bool:
        return self.kind in ("double-route", "unsafe-cycle")


@dataclass(frozen=True)
class TopologyReport:
    errors: tuple[Finding, ...]
    warnings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.errors


def policy_label(flow: FlowConfig) -> str:
    """How a flow names remote topics, in a few words: `prefix`, `identity`, `rename ${t}.r`."""
    if flow.policy.kind == "rename":
        return f"rename {flow.policy.rename_format}"
    return flow.policy.kind


# --- following records ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Hop:
    flow: FlowConfig
    policy: ReplicationPolicy
    selector: TopicSelector


def _hops(
    config: FerryConfig, controls: Mapping[str, FlowControl] | None = None
) -> dict[str, list[_Hop]]:
    out: dict[str, list[_Hop]] = {}
    for flow in config.enabled_flows:
        policy = flow.replication_policy
        selector = TopicSelector(flow, policy, (controls or {}).get(flow.name))
        out.setdefault(flow.source, []).append(_Hop(flow, policy, selector))
    return out


def _walk(hops: Mapping[str, list[_Hop]], origin: str, topic: str) -> Iterator[tuple[Route, bool]]:
    """Every route of `origin`'s `topic`, depth first: (route, True) where a route comes back
    into a cluster it has been in (it is not extended: that is the loop), else (route, False).
    """
    stack = [Route((origin,), (topic,))]
    while stack:
        route = stack.pop()
        here, name = route.clusters[-1], route.topics[-1]
        for hop in reversed(hops.get(here, [])):
            target = hop.flow.target
            if target == origin or not hop.selector.accepts(name):
                continue  # the origin header, or the flow's own selection, stops it
            remote = hop.policy.remote_topic(here, name)
            longer = Route((*route.clusters, target), (*route.topics, remote))
            loops = target in route.clusters
            yield longer, loops
            if not loops:
                stack.append(longer)


def _policies(config: FerryConfig, *routes: Route) -> str:
    flows: list[FlowConfig] = []
    for route in routes:
        for source, target in zip(route.clusters, route.clusters[1:], strict=False):
            flow = config.flow(source, target)
            if flow not in flows:
                flows.append(flow)
    labels = {policy_label(f) for f in flows}
    if len(labels) == 1:
        return f"{labels.pop()} policy on {', '.join(f.name for f in flows)}"
    return "policies: " + ", ".join(f"{f.name} {policy_label(f)}" for f in flows)


def _findings(
    config: FerryConfig, hops: Mapping[str, list[_Hop]], origin: str, topic: str
) -> list[Finding]:
    found: list[Finding] = []
    first: dict[tuple[str, str], Route] = {}
    reported: set[tuple[str, ...]] = set()
    for route, loops in _walk(hops, origin, topic):
        at, name = route.clusters[-1], route.topics[-1]
        if loops:
            entry = route.clusters.index(at)
            into = Route(route.clusters[: entry + 1], route.topics[: entry + 1])
            lap = Route(route.clusters[entry:], route.topics[entry:])
            key = ("cycle", lap.path, name)
            if key in reported:
                continue
            reported.add(key)
            found.append(
                Finding(
                    "unsafe-cycle",
                    f"{origin}'s topic {topic} would go round a cycle: {into.path} brings it "
                    f"into {at}'s topic {into.topics[-1]}, and {lap.path} copies it back into "
                    f"{at} (as {name}); its origin {origin} is not on that cycle, so ferry's "
                    f"origin header does not stop it, and the topic names do not either "
                    f"({_policies(config, lap)})",
                    origin=origin,
                    topic=topic,
                    cluster=at,
                    remote_topic=name,
                    routes=(into, lap),
                )
            )
            continue
        earlier = first.setdefault((at, name), route)
        if earlier is route or (at, name) in reported:
            continue
        reported.add((at, name))
        found.append(
            Finding(
                "double-route",
                f"{origin}'s topic {topic} reaches {at}'s topic {name} twice: {earlier.path}, "
                f"and {route.path} ({_policies(config, earlier, route)}); every record would "
                f"be copied there twice",
                origin=origin,
                topic=topic,
                cluster=at,
                remote_topic=name,
                routes=(earlier, route),
            )
        )
    return found


def _unused_clusters(config: FerryConfig) -> list[Finding]:
    used = {a for flow in config.enabled_flows for a in (flow.source, flow.target)}
    return [
        Finding(
            "unused-cluster",
            f"cluster {alias} is in no enabled flow: ferry neither reads nor writes it",
            cluster=alias,
        )
        for alias in config.clusters
        if alias not in used
    ]


def check_topics(
    config: FerryConfig,
    topics: Mapping[str, Iterable[str]],
    controls: Mapping[str, FlowControl] | None = None,
) -> TopologyReport:
    """The graph with real names: `topics` maps a cluster alias to its topics' names, and
    `controls` a flow's name to its runtime override (topics added or removed while running).

    Every topic is followed as if records were produced into it on its own cluster, except a
    topic some flow writes under a new name (`A.orders` on B under the prefix policy): its
    records come from upstream, and following them from there already covers it.
    """
    hops = _hops(config, controls)
    names = {alias: sorted(set(ts)) for alias, ts in topics.items()}
    copies: set[tuple[str, str]] = set()
    for here, flows in hops.items():
        for hop in flows:
            for name in names.get(here, ()):
                remote = hop.policy.remote_topic(here, name)
                if remote != name and hop.selector.accepts(name):
                    copies.add((hop.flow.target, remote))
    errors: list[Finding] = []
    for alias in config.clusters:
        for name in names.get(alias, ()):
            if (alias, name) not in copies:
                errors += _findings(config, hops, alias, name)
    return TopologyReport(tuple(errors), tuple(_unused_clusters(config)))


def check_config(config: FerryConfig) -> TopologyReport:
    """The graph at load, with example names from the enabled flows' `topics` patterns."""
    hops = _hops(config)
    examples = sorted({e for flow in config.enabled_flows for e in _flow_examples(flow)})
    errors: list[Finding] = []
    for alias in config.clusters:
        for name in examples:
            errors += [
                replace(
                    f,
                    message=f"{f.message} [{name} is an example name: the topics "
                    "patterns admit it, and no topic list is known before ferry runs]",
                )
                for f in _findings(config, hops, alias, name)
            ]
    idle = [
        Finding(
            "idle-flow",
            f"flow {flow.name} copies nothing: none of the names its topics "
            f"{_quoted(flow.topics)} admit gets past topics.exclude "
            f"{_quoted(flow.topics_exclude)}, the internal-topic rule and the cycle rule "
            f"(checked on example names: {', '.join(_flow_examples(flow))})",
            flow=flow.name,
        )
        for flow in config.enabled_flows
        if _flow_examples(flow) and not any(_accepts(flow, n) for n in _flow_examples(flow))
    ]
    return TopologyReport(tuple(errors), tuple(idle + _unused_clusters(config)))


def _accepts(flow: FlowConfig, name: str) -> bool:
    return TopicSelector(flow, flow.replication_policy).accepts(name)


def _quoted(patterns: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{p}'" for p in patterns) + "]"


# --- example names -------------------------------------------------------------------------

_sre: Any = importlib.import_module("re._parser")
_MAXREPEAT: Any = importlib.import_module("re._constants").MAXREPEAT
_ANY_NAME = "any-topic"
_CATEGORY_CHAR = {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_NOT_SPACE": "a"}


def _flow_examples(flow: FlowConfig) -> list[str]:
    return [e for pattern in flow.topics for e in example_topics(pattern)]


def example_topics(pattern: str) -> list[str]:
    """Up to two topic names the regex matches whole, shortest first; [] where it is too
    intricate to invent one (lookarounds, negated classes, back references)."""
    try:
        parsed = _sre.parse(pattern)
    except re.error:
        return []
    names: list[str] = []
    for variant in (0, 1):
        name = _example(list(parsed), variant)
        if name and name not in names and re.fullmatch(pattern, name):
            names.append(name)
    return names


def _example(items: list[Any], variant: int) -> str | None:
    out = ""
    for op, arg in items:
        piece = _piece(str(op), arg, variant)
        if piece is None:
            return None
        out += piece
    return out


def _piece(op: str, arg: Any, variant: int) -> str | None:
    if op == "LITERAL":
        return chr(arg)
    if op == "ANY":
        return "t"
    if op == "AT":
        return ""
    if op == "CATEGORY":
        return _CATEGORY_CHAR.get(str(arg))
    if op == "IN":
        return _one_of(arg)
    if op == "SUBPATTERN":
        return _example(list(arg[-1]), variant)
    if op == "BRANCH":
        branches = arg[1]
        return _example(list(branches[variant % len(branches)]), variant)
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, high, sub = arg
        sub = list(sub)
        if [str(o) for o, _ in sub] == ["ANY"] and variant and low <= len(_ANY_NAME) <= high:
            return _ANY_NAME  # reads as a name in a message: "C's topic any-topic ..."
        count = low if variant == 0 or (high != _MAXREPEAT and low >= high) else low + 1
        one = _example(sub, variant)
        return None if one is None else one * count
    return None


def _one_of(items: list[Any]) -> str | None:
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[0])
        if name == "CATEGORY":
            return _CATEGORY_CHAR.get(str(arg))
        return None  # NEGATE and the rest: no example
    return None
