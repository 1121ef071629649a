"""Translating one group's committed positions from one cluster to another.

Three ways, chosen per partition by `ferry.offsets.failover`:
- forward, through the exact runs of the flow that copied the topic to the other cluster;
- inverse (failback), for a remote topic the group read: back through the runs of the flow
  that created it, to the original topic;
- from checkpoints, when the cluster the group leaves does not answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ferry.kafka.mm2_records import Checkpoint
from ferry.offsets.index import Match
from ferry.offsets.stores import RunsStore
from ferry.policy import ReplicationPolicy

__all__ = ["Position", "checkpoint_positions", "forward_positions", "inverse_positions"]


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
        return asdict(self)


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


def inverse_positions(
    committed: dict[tuple[str, int], int],
    policy: ReplicationPolicy,
    origin_alias: str,
    runs: RunsStore,
) -> list[Position]:
    """Positions in remote topics that came from `origin_alias`, mapped back to the originals.

    `policy` and `runs` belong to the flow origin -> here.
    """
    positions = []
    for (topic, partition), offset in sorted(committed.items()):
        if policy.topic_source(topic) != origin_alias:
            continue
        original = policy.upstream_topic(topic)
        if original is None or not runs.has(original, partition):
            continue
        t = runs.index(original, partition).upstream(offset)
        match = t.match.value if t.match is not Match.NOTHING else "nothing"
        positions.append(
            Position(topic, partition, offset, original, t.offset, "inverse runs", match, t.beyond)
        )
    return positions


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
