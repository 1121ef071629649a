"""The audit's shared types: what to read (a flow's plan, per topic) and what was found
(per topic: counts, delay percentiles, buckets and ranges). Pure data, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

from ferry.config.model import ClusterConfig

__all__ = ["FlowPlan", "Offsets", "TopicPlan", "TopicResult"]

Offsets = dict[int, tuple[int, int]]  # partition -> (first held offset, end offset)


@dataclass(frozen=True)
class TopicPlan:
    topic: str
    remote_topic: str
    source: Offsets
    remote: Offsets  # empty when the remote topic does not exist (yet)
    positions: dict[int, int]  # source partition -> replicated position (next offset)


@dataclass(frozen=True)
class FlowPlan:
    name: str
    source: ClusterConfig
    target: ClusterConfig
    source_cluster_id: str
    topics: list[TopicPlan]


@dataclass
class TopicResult:
    topic: str
    remote_topic: str
    source: int = 0
    copied: int = 0
    copies: int = 0
    missing: int = 0
    duplicated: int = 0
    foreign: int = 0
    expired: int = 0
    in_flight: int = 0
    # Replication delay (first copy's append time minus the source record's timestamp), when
    # the remote topic stamps records with LogAppendTime; None where it keeps CreateTime (a
    # copy keeps its source record's timestamp, so there is nothing to measure).
    delay_p50_ms: int | None = None
    delay_p99_ms: int | None = None
    # bucket start (ms) -> {"source", "copied", "missing", "in_flight", "duplicated", "target"}
    # and, where measured, "delay_p50_ms" and "delay_p99_ms"
    buckets: dict[int, dict[str, int]] = field(default_factory=dict)
    missing_ranges: list[dict[str, int]] = field(default_factory=list)
    duplicated_ranges: list[dict[str, int]] = field(default_factory=list)
    foreign_ranges: list[dict[str, int]] = field(default_factory=list)
    ranges_truncated: bool = False
