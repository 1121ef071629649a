"""ferry run's RPO as its metrics and API read it (`ferry.engine.rpo_watch`): the last
measurement, NaN or null where not known, and all of it unknown once stale."""

from __future__ import annotations

import math
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ferry.api.views import partition_rows
from ferry.engine.flow_state import FlowState
from ferry.engine.rpo_watch import STALE_SECONDS, RpoMetrics, _write_rpo, read_rpo

RPOS: dict[tuple[str, int], float | None] = {("orders", 0): 0.0, ("orders", 1): 12.5}


def _gauge(state: FlowState) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(RpoMetrics(lambda: [("A->B", state)]))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    family = next(f for f in families if f.name == "ferry_rpo_seconds")
    assert "oldest source record not yet on the target" in family.documentation
    return {(s.labels["topic"], s.labels["partition"]): s.value for s in family.samples}


def test_never_measured_is_unknown(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    assert read_rpo(state).worst is None
    assert _gauge(state) == {}


def test_the_last_measurement_per_partition_and_the_worst(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    _write_rpo(state, time.time(), RPOS)
    rpo = read_rpo(state)
    assert rpo.partitions == {"orders:0": 0.0, "orders:1": 12.5}
    assert rpo.worst == 12.5
    assert _gauge(state) == {("orders", "0"): 0.0, ("orders", "1"): 12.5}


def test_a_partition_not_read_in_time_is_nan_and_the_flow_unknown(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    _write_rpo(state, time.time(), {**RPOS, ("orders", 2): None})
    assert read_rpo(state).worst is None
    assert math.isnan(_gauge(state)[("orders", "2")])
    state.write_latest({"orders:2": 9})
    assert [r["rpo_seconds"] for r in partition_rows(state)] == [None]


def test_a_stale_measurement_is_unknown_not_its_last_values(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    _write_rpo(state, time.time() - STALE_SECONDS - 1, RPOS)
    assert read_rpo(state).worst is None
    assert all(math.isnan(v) for v in _gauge(state).values())
    assert len(_gauge(state)) == 2
