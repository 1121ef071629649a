"""`ferry monitor`'s `ferry_rpo_seconds` gauge, driven by a scripted sampler: a partition's RPO
as sampled, NaN (never 0) while it is not known, series gone with their partitions."""

from __future__ import annotations

import math
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from ferry.config.model import FlowConfig
from ferry.errors import KafkaUnavailableError
from ferry.monitor.metrics import MonitorMetrics
from ferry.monitor.sampler import FlowSample
from ferry.monitor.service import MonitorService
from tests.unit.test_monitor_service import FakeSampler, _config, _latest

Script = Callable[[FlowConfig], FlowSample]
PAIRS = (_latest(0, 10, 10), _latest(1, 10, 4))


def _rpo(metrics: MonitorMetrics) -> dict[tuple[str, str, str], float]:
    families = text_string_to_metric_families(metrics.exposition().decode())
    family = next(f for f in families if f.name == "ferry_rpo_seconds")
    assert "oldest source record not yet on the target" in family.documentation
    return {
        (s.labels["flow"], s.labels["topic"], s.labels["partition"]): s.value
        for s in family.samples
    }


def _sample(rpos: dict[tuple[str, int], float | None] | None) -> Script:
    return lambda flow: FlowSample(flow.name, PAIRS, rpos)


def test_the_gauge_is_each_partitions_rpo_and_nan_when_unknown() -> None:
    sampler = FakeSampler(
        _sample({("orders", 0): 0.0, ("orders", 1): 42.5}),
        _sample({("orders", 0): 0.0, ("orders", 1): None}),
        KafkaUnavailableError("A", "127.0.0.1:1", "timed out"),
        _sample(None),
        _sample({("orders", 1): 3.0}),
    )
    config = _config()
    service = MonitorService(config, sampler=sampler, log=lambda _line: None)
    flow = config.flow("A", "B")
    service.tick(flow)
    assert _rpo(service.metrics) == {("A->B", "orders", "0"): 0.0, ("A->B", "orders", "1"): 42.5}
    service.tick(flow)
    rpo = _rpo(service.metrics)
    assert rpo[("A->B", "orders", "0")] == 0.0
    assert math.isnan(rpo[("A->B", "orders", "1")])
    for _ in range(2):  # no sample, then a sample without the RPO: not known, not the last
        service.tick(flow)
        assert all(math.isnan(v) for v in _rpo(service.metrics).values())
        assert len(_rpo(service.metrics)) == 2
    service.tick(flow)
    assert _rpo(service.metrics) == {("A->B", "orders", "1"): 3.0}
