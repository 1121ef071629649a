"""Translating one group's committed positions from one cluster to another.

Two ways, chosen per partition by `ferry.offsets.failover`:
- along a route of flows (`ferry.offsets.routes`): forward through the exact runs of a flow
  that copied the topic on, inverse (failback) back through the runs of the flow that created
  a remote topic, hop after hop (chains, aggregates);
- from checkpoints, when the cluster the group leaves does not answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ferry.config.model import FlowConfig
from ferry.kafka.mm2_records import Checkpoint
from ferry.offsets.index import Match
from ferry.offsets.routes import RouteHop
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.policy import ReplicationPolicy

__all__ = ["Position", "checkpoint_positions", "forward_positions", "routed_position"]


@dataclass(frozen=True)
class Position:
    """Where the group resumes on the other cluster, for one partition."""

    topic: str  # on the cluster the group leaves
    partition: int
    committed: int  # the group's committed offset there
    target_topic: str  # on the cluster it moves to
    offset: int  # translated: the next record to read there
    via: str  # "runs", "inverse runs" or "checkpoint"
    match: str  # see ferry.offsets.index.Match; "checkpoint" when read from one
    beyond: int = 0  # consumed offsets past what was replicated (delivered again later)

    def as_json(self) -> dict[str, Any]:
        # Its fields as they are (all plain values): not `asdict`, whose deep copy of each
        # field was most of the time a 1,000-group failover took to write its JSON report.
        return dict(vars(self))


def forward_positions(
    committed: dict[tuple[str, int], int],
    accepts: Callable[[str], bool],
    policy: ReplicationPolicy,
    source_alias: str,
    runs: RunsStore,
) -> list[Position]:
    """Positions of the partitions a flow replicates (`accepts`), through its runs."""
    positions = []
    for (topic, partition), offset in sorted(committed.items()):
        if not accepts(topic):
            continue
        t = runs.index(topic, partition).downstream(offset)
        positions.append(
            Position(
                topic,
                partition,
                offset,
                policy.remote_topic(source_alias, topic),
                t.offset,
                "runs",
                t.match.value,
                t.beyond,
            )
        )
    return positions


# How sure a composed translation is: the least sure of its hops.
_RANK = {Match.EXACT: 0, Match.GAP: 1, Match.END: 2, Match.NOTHING: 3}


def routed_position(
    route: Sequence[RouteHop],
    partition: int,
    committed: int,
    runs: Callable[[FlowConfig], RunsStore],
) -> Position | None:
    """A position carried along `route`, hop by hop through each flow's runs (`runs(flow)`).

    None when an inverse hop, or a forward one through a disabled flow, finds no runs for the
    partition: the records did not travel that way (or its runs are gone), so another route
    must carry it. An enabled flow without runs yet maps to the start of its copy.
    """
    offset, worst, beyond = committed, Match.EXACT, 0
    for hop in route:
        store = runs(hop.flow)
        if (hop.direction == "inverse" or not hop.flow.enabled) and not store.has(
            hop.source_topic, partition
        ):
            return None  # the records did not come (or go) this way
        if hop.direction == "inverse":
            t = store.index(hop.source_topic, partition).upstream(offset)
        else:
            t = store.index(hop.source_topic, partition).downstream(offset)
        offset, beyond = t.offset, beyond + t.beyond
        worst = max(worst, t.match, key=_RANK.__getitem__)
    if len(route) == 1:
        via = "runs" if route[0].direction == "forward" else "inverse runs"
    else:
        via = ", ".join(hop.label for hop in route)
    first, last = route[0], route[-1]
    return Position(
        first.topic, partition, committed, last.next_topic, offset, via, worst.value, beyond
    )


def checkpoint_positions(
    checkpoints: list[Checkpoint], policy: ReplicationPolicy
) -> list[Position]:
    """Positions straight from a group's checkpoints (the target's view; the source is gone)."""
    return [
        Position(
            policy.upstream_topic(c.topic) or c.topic,
            c.partition,
            c.upstream_offset,
            c.topic,
            c.offset,
            "checkpoint",
            "checkpoint",
        )
        for c in checkpoints
    ]
