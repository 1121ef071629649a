"""The graph check while ferry runs: which hops it refuses, and which changes.

Pure code, no I/O. At load the check follows example names (`check_config`); while running,
topics appear (a topic newly matching a flow's regex) and the API adds topics to flows, so
the check is made again over the clusters' real topic lists and the flows' runtime overrides
(`check_topics`). An error then must not stop ferry: the flows that are fine go on, and only
the hop that would copy a record twice, or round a cycle, is held back.

Which hop: every error names two paths (see `ferry.graph.check`), and the last hop of one
of them is refused, for that topic name on that flow's source. For a double route, the second
path (the one found later, through flows further down the config): its copy would land where
a copy already lands. For an unsafe cycle, the way in (C->A feeding an identity pair A<->B):
the pair's own records still go both ways, and only what would circle is kept out. Refusing
one hop can end other errors too, so the check is made again
with the refusals until none is left; each round refuses at least one more (flow, topic)
pair or stops, so it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferry.config.model import FerryConfig
from ferry.flows.override import FlowControl
from ferry.graph.check import Finding, check_topics

__all__ = ["Refusals", "new_errors", "refusals"]


@dataclass(frozen=True)
class Refusals:
    """The errors found, and per flow the source topics it must not copy because of them."""

    errors: tuple[Finding, ...]
    topics: Mapping[str, frozenset[str]]  # flow name -> topic names on its source

    def of(self, flow: str) -> frozenset[str]:
        return self.topics.get(flow, frozenset())


def _refused_hop(finding: Finding) -> tuple[str, str]:
    """(flow name, topic on its source): a double route's second path's last hop; a cycle's
    way in."""
    into, lap = finding.routes
    path = into if finding.kind == "unsafe-cycle" else lap
    return f"{path.clusters[-2]}->{path.clusters[-1]}", path.topics[-2]


def refusals(
    config: FerryConfig,
    topics: Mapping[str, Iterable[str]],
    controls: Mapping[str, FlowControl] | None = None,
) -> Refusals:
    """The hops to hold back so that no source topic reaches a remote topic twice or loops."""
    names = {alias: sorted(set(ts)) for alias, ts in topics.items()}
    current = dict(controls or {})
    refused: dict[str, set[str]] = {}
    errors: list[Finding] = []
    while True:
        more = False
        for finding in check_topics(config, names, current).errors:
            if finding not in errors:
                errors.append(finding)
            flow, topic = _refused_hop(finding)
            if topic in refused.get(flow, ()):
                continue  # removing it did not help (heartbeats always travel): said, not looped
            refused.setdefault(flow, set()).add(topic)
            current[flow] = current.get(flow, FlowControl()).remove(topic)
            more = True
        if not more:
            break
    return Refusals(tuple(errors), {f: frozenset(t) for f, t in refused.items()})


def new_errors(
    config: FerryConfig,
    topics: Mapping[str, Iterable[str]],
    controls: Mapping[str, FlowControl],
    flow: str,
    changed: FlowControl,
) -> tuple[Finding, ...]:
    """The errors a change of one flow's override would add (the ones already there are
    not its doing: they are refused hop by hop as they are)."""
    before = check_topics(config, topics, controls).errors
    after = check_topics(config, topics, {**controls, flow: changed}).errors
    return tuple(f for f in after if f not in before)
