"""The flow's counters at thousands of partitions: `stats_signature` changes whenever what
`stats()` reads changes, so the progress loop may read the counters only then; an idle
partition's live entry carries no empty histograms."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ferry.engine.flow_state import FlowState, LeaseBounds, partition_entry
from ferry.engine.latency import Histogram


def _entry(topic: str, partition: int, copied: int) -> dict[str, object]:
    latency, age = Histogram(), Histogram()
    for _ in range(copied):
        latency.observe(5.0)
        age.observe(7.0)
    result = SimpleNamespace(
        topic=topic,
        partition=partition,
        end=copied,
        copied=copied,
        skipped=0,
        bytes=10 * copied,
        expired=0,
        latency=latency,
        record_age=age,
    )
    return partition_entry(result)


def test_an_idle_partition_reports_no_histograms_and_the_counters_stay_the_same(
    tmp_path: Path,
) -> None:
    idle, busy = _entry("t", 0, 0), _entry("t", 1, 2)
    assert "latency" not in idle and "record_age" not in idle
    assert Histogram.from_json(busy["latency"]).count == 2  # type: ignore[arg-type]
    state = FlowState(tmp_path)
    state.write_live("task", [idle, busy])
    stats = state.stats()
    assert stats["records"] == 2
    assert stats["partitions"]["t:0"] == {"records": 0, "bytes": 0, "position": 0}
    assert Histogram.from_json(stats["partitions"]["t:1"]["record_age"]).count == 2


def test_the_signature_changes_with_every_write_the_counters_come_from(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    signatures = [state.stats_signature()]
    state.write_live("a", [_entry("t", p, 1) for p in range(100)])
    signatures.append(state.stats_signature())
    assert state.stats_signature() == signatures[-1]  # nothing written: the same
    state.write_live("a", [_entry("t", p, 2) for p in range(100)])
    signatures.append(state.stats_signature())
    state.write_live("b", [_entry("u", 0, 1)])
    signatures.append(state.stats_signature())
    state.absorb_leases(1, 1.0, ["native"], LeaseBounds("run", 0.0, 0.0))
    signatures.append(state.stats_signature())
    assert len(set(signatures)) == len(signatures)
    assert state.stats()["records"] == 201
