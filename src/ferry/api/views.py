"""A flow as the API shows it, from the flow's state dir (what `ferry run` last counted).

The lag is the planner's (or the lease watch's) last look at the source's ends against the
position the flow last committed on the target; latency is the mean replication latency
(target ack time minus record timestamp) of everything copied, in milliseconds. The recovery
point objective (`rpo_seconds`: the age of the oldest source record not yet on the target, the
flow's worst partition) is ferry run's last measurement (`ferry.engine.rpo_watch`, every few
seconds); null while it is not known, never 0.
"""

from __future__ import annotations

from typing import Any

from ferry.config.model import FlowConfig
from ferry.engine.executors import held_partitions
from ferry.engine.flow_state import FlowState, tp_key
from ferry.engine.latency import Histogram
from ferry.engine.rpo_watch import read_rpo
from ferry.flows.override import FlowControl
from ferry.flows.status import Condition, flow_status

__all__ = ["flow_summary", "latency_totals", "partition_rows"]


def latency_totals(stats: dict[str, Any]) -> Histogram:
    """Every partition's replication latencies in one histogram (everything copied so far)."""
    latency = Histogram()
    for entry in stats.get("partitions", {}).values():
        latency.add(Histogram.from_json(entry.get("latency")))
    return latency


def flow_summary(
    flow: FlowConfig, state: FlowState, control: FlowControl, condition: Condition
) -> dict[str, Any]:
    stats = state.stats()
    latency = latency_totals(stats)
    status = flow_status(control, condition)
    held = held_partitions(state.unabsorbed_tasks(stats))  # stats.json read once per call
    topics = set(state.lease_topics()) | {k.rpartition(":")[0] for k in state.latest()}
    # Heartbeats always travel (they measure the flow's latency): listed apart, never removable.
    policy = flow.replication_policy
    internal = {t for t in topics if policy.is_heartbeats_topic(t)}
    return {
        "name": flow.name,
        "source": flow.source,
        "target": flow.target,
        "state": status.state,
        "error": status.error,
        "topics": sorted(topics - control.removed - internal),
        "internal_topics": sorted(internal),
        "control": control.as_json(),
        "records": int(stats.get("records", 0)),
        "bytes": int(stats.get("bytes", 0)),
        "lag": state.lag(stats),
        "latency_ms": round(latency.total / latency.count, 1) if latency.count else None,
        "rpo_seconds": read_rpo(state).worst,
        # Partitions the running lease holds (a schema registry not answering), each said.
        "held": [why for _tp, why in sorted(held.items())],
    }


def partition_rows(state: FlowState) -> list[dict[str, Any]]:
    """Per source partition: its end, the flow's position, lag, RPO, records copied, and why it
    holds (null: it does not)."""
    stats = state.stats()
    copied = stats.get("partitions", {})
    held = {tp_key(*tp): why for tp, why in held_partitions(state.unabsorbed_tasks(stats)).items()}
    ends = state.latest()
    rpos = read_rpo(state).partitions
    rows = []
    for key in sorted(set(ends) | set(copied), key=_by_partition):
        topic, _, partition = key.rpartition(":")
        entry = copied.get(key, {})
        position = entry.get("position")
        end = ends.get(key)
        rows.append(
            {
                "topic": topic,
                "partition": int(partition),
                "end": end,
                "position": position,
                "lag": max(0, end - (position or 0)) if end is not None else None,
                "records": int(entry.get("records", 0)),
                "rpo_seconds": rpos.get(key),
                "held": held.get(key),
            }
        )
    return rows


def _by_partition(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)
