"""`FlowState.recent_latency_ms`: the latency `ferry status` shows where no heartbeats tell it:
the running lease's copies, else the last batch's, never an average over the flow's life."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ferry.engine.flow_state import FlowState
from ferry.engine.latency import Histogram


def _partition(partition: int, *latencies_ms: float) -> dict[str, Any]:
    latency = Histogram()
    for ms in latencies_ms:
        latency.observe(ms)
    entry = {"topic": "t", "partition": partition, "end": 10, "copied": len(latencies_ms)}
    return {**entry, "skipped": 0, "bytes": 1, "expired": 0, "latency": latency.to_json()}


def test_the_last_batch_counts_then_the_running_lease(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    assert state.recent_latency_ms() is None  # nothing copied yet
    state.add_batch(1, [_partition(0, 1000, 3000)], 1.0)
    state.add_batch(2, [_partition(0, 10), _partition(1, 30)], 1.0)
    assert state.recent_latency_ms() == 20  # the last batch only, both its partitions
    state.write_live("task-0", [_partition(0, 400)])
    assert state.recent_latency_ms() == 400  # a lease running now
