"""Which flows a consumer position travels through to reach another cluster.

Pure code, no I/O. A group's position in a topic on cluster X is carried to cluster Y by
composing exact translations, one per flow on the way:

- **forward** through an enabled flow X->Z that copies the topic (its selector accepts the
  name on X): the position in Z's remote topic, through that flow's runs;
- **inverse** through a flow S->X whose policy says the topic came from S (`B.A.orders` came
  from B): the position in the topic it copies on S, through the same runs read backwards.

So a chain A->B->C fails over from A to C forward twice (`orders` -> `A.orders` on B ->
`B.A.orders` on C) and back inverse twice; an aggregate C fed by A->C and B->C fails over to a
second aggregate D fed by A->D and B->D by going back to the origin and forward again
(`A.orders` on C -> `orders` on A -> `A.orders` on D), without a flow between C and D.

Each hop is exact (see `ferry.offsets.index`), so the composition is too: hop 1 lands on the
copy of the first record at or after the position, and hop 2 on the copy of that copy.

The shortest route wins (one hop where a direct flow exists); among routes of one length,
inverse hops come first (a failback goes back the way the records came) and then flows in
the config's order. A route never visits a cluster twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from ferry.config.model import FerryConfig, FlowConfig
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.policy import ReplicationPolicy

__all__ = ["RouteHop", "routes"]

Direction = Literal["forward", "inverse"]


@dataclass(frozen=True)
class RouteHop:
    """One translation: through `flow`'s runs, from `topic` on `here` to `next_topic` on
    `there`. Forward, the runs are keyed by `topic`; inverse, by `next_topic`."""

    direction: Direction
    flow: FlowConfig
    here: str
    topic: str
    there: str
    next_topic: str

    @property
    def source_topic(self) -> str:
        """The topic the flow's runs are keyed by (a topic of the flow's source)."""
        return self.topic if self.direction == "forward" else self.next_topic

    @property
    def label(self) -> str:
        return f"{'runs' if self.direction == 'forward' else 'inverse runs'} {self.flow.name}"


def _policy(flow: FlowConfig) -> ReplicationPolicy:
    return flow.replication_policy


def _steps(
    config: FerryConfig,
    here: str,
    topic: str,
    destination: str,
    direct: str,
    control: Callable[[FlowConfig], FlowControl | None],
) -> Iterator[RouteHop]:
    """Every single hop from `topic` on `here`: inverse ones first, then forward ones.

    Forward hops go through enabled flows, and through the `direct` one (the group's own
    clusters, `from->to`) even when it is disabled: its runs say where its copies landed.

    Inverse hops may go through a disabled flow (failing back after the flow was turned
    off): its runs are still on `here`. But an identity policy says every topic came from
    its source, so a disabled identity flow is followed back only straight to `destination`.
    """
    for flow in config.flows:
        if flow.target != here:
            continue
        policy = _policy(flow)
        keeps_names = policy.remote_topic(flow.source, "t") == "t"
        if keeps_names and not (flow.enabled or flow.source == destination):
            continue
        original = policy.upstream_topic(topic)
        if policy.topic_source(topic) == flow.source and original is not None:
            yield RouteHop("inverse", flow, here, topic, flow.source, original)
    for flow in config.flows:
        if flow.source != here or not (flow.enabled or flow.name == direct):
            continue
        policy = _policy(flow)
        if TopicSelector(flow, policy, control(flow)).accepts(topic):
            remote = policy.remote_topic(here, topic)
            yield RouteHop("forward", flow, here, topic, flow.target, remote)


def routes(
    config: FerryConfig,
    here: str,
    topic: str,
    destination: str,
    control: Callable[[FlowConfig], FlowControl | None] = lambda _flow: None,
    avoid: frozenset[str] = frozenset(),
) -> list[tuple[RouteHop, ...]]:
    """Every route of `topic` on `here` to `destination`, shortest first (breadth first).

    `control(flow)`: that flow's runtime override (topics added or removed over the API).
    `avoid`: clusters no hop may reach (a lost one: its runs cannot be read).
    """
    direct = f"{here}->{destination}"
    found: list[tuple[RouteHop, ...]] = []
    level: list[tuple[RouteHop, ...]] = [()]
    for _ in range(len(config.clusters)):
        longer: list[tuple[RouteHop, ...]] = []
        for route in level:
            at, name = (route[-1].there, route[-1].next_topic) if route else (here, topic)
            visited = {here, *avoid, *(h.there for h in route)}
            for hop in _steps(config, at, name, destination, direct, control):
                if hop.there in visited:
                    continue
                if hop.there == destination:
                    found.append((*route, hop))
                else:
                    longer.append((*route, hop))
        level = longer
    return found
