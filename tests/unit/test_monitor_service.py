"""`ferry monitor`'s loop with a scripted sampler: alerts, recoveries, metrics, failures.

The sampler is the only Kafka I/O, so a fake one that returns chosen offsets each period
drives the whole service: detector, gauges and counters, log lines and the stop/health logic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.monitor.sampler import FlowSample, OffsetPair
from ferry.monitor.service import MonitorService, period_of, sample_once
from ferry.monitor.sync_delay import DelayKind

LATEST, CONSUME = DelayKind.LATEST, DelayKind.CONSUME
Script = Callable[[FlowConfig], FlowSample]


def _config(**flow: object) -> FerryConfig:
    settings: dict[str, object] = {
        "enabled": True,
        "sync_group_offsets_interval_seconds": 1,
        **flow,
    }
    return FerryConfig(
        clusters={
            alias: ClusterConfig(alias=alias, bootstrap_servers=f"127.0.0.1:{port}")
            for alias, port in (("A", 1), ("B", 2))
        },
        flows=(
            FlowConfig(source="A", target="B", **settings),  # type: ignore[arg-type]
            FlowConfig(source="B", target="A"),
        ),
    )


def _latest(partition: int, a: int, b: int, topic: str = "orders") -> OffsetPair:
    return OffsetPair(LATEST, None, topic, f"A.{topic}", partition, a, b)


def _consume(group: str, partition: int, a: int, b: int) -> OffsetPair:
    return OffsetPair(CONSUME, group, "orders", "A.orders", partition, a, b)


class FakeSampler:
    """Returns the next scripted sample (or raises the next scripted error) per call."""

    def __init__(self, *steps: tuple[OffsetPair, ...] | BaseException | Script) -> None:
        self.steps = list(steps)
        self.calls = 0
        self.closed = False

    def sample(self, flow: FlowConfig) -> FlowSample:
        step = self.steps[min(self.calls, len(self.steps) - 1)]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        if callable(step):
            return step(flow)
        return FlowSample(flow.name, step)

    def close(self) -> None:
        self.closed = True


class Harness:
    def __init__(self, sampler: FakeSampler, **flow: object) -> None:
        self.lines: list[str] = []
        self.config = _config(**flow)
        self.flow = self.config.flow("A", "B")
        self.service = MonitorService(self.config, sampler=sampler, log=self.lines.append)

    def ticks(self, n: int) -> None:
        for _ in range(n):
            self.service.tick(self.flow)

    def value(self, name: str, **labels: str) -> float | None:
        return self.service.metrics.registry.get_sample_value(name, labels)

    def alert(self, partition: int = 0, kind: str = "latest", group: str = "") -> float | None:
        labels = {"kind": kind, "group": group, "topic": "orders", "partition": str(partition)}
        return self.value("ferry_sync_delay_alert", flow="A->B", **labels)

    def raised(self, kind: str = "latest") -> float | None:
        return self.value("ferry_sync_delay_alerts_total", flow="A->B", kind=kind)


def _growing(periods: int, a0: int, b0: int, a_step: int, b_step: int) -> list[tuple[OffsetPair]]:
    return [(_latest(0, a0 + i * a_step, b0 + i * b_step),) for i in range(periods)]


# --- alerts and recoveries --------------------------------------------------------------------


def test_a_stalled_copy_raises_one_alert_with_its_numbers_then_recovers() -> None:
    steady = _growing(4, 10_000, 5_000, 100, 100)
    stalled = [(_latest(0, 10_400 + i * 100, 5_300),) for i in range(4)]
    caught_up = [(_latest(0, 10_800, 5_800),)]
    h = Harness(FakeSampler(*steady, *stalled, *caught_up))

    h.ticks(4)
    assert h.alert() == 0 and h.raised() == 0
    h.ticks(2)
    assert h.alert() == 0, "B's window still holds growth from before the stall"
    assert h.service.alerts() == []
    h.ticks(1)
    assert h.alert() == 1 and h.raised() == 1
    assert h.lines == [
        "sync delay: flow=A->B kind=latest topic=orders partition=0 a_sub=100 b_sub=0 "
        "threshold=0 a=10600 b=5300"
    ]
    # What the console of `ferry run` lists: the series, its offsets and the rule's numbers.
    [alert] = h.service.alerts()
    assert (alert["flow"], alert["topic"], alert["partition"]) == ("A->B", "orders", 0)
    assert (alert["a_offset"], alert["b_offset"], alert["a_sub"], alert["b_sub"]) == (
        10_600,
        5_300,
        100,
        0,
    )
    h.ticks(1)
    assert h.alert() == 1 and h.raised() == 1, "a lasting delay is one alert, not one per period"
    assert len(h.lines) == 1

    h.ticks(1)
    assert h.alert() == 0 and h.raised() == 1
    assert h.service.alerts() == []
    assert h.lines[-1] == (
        "sync delay over (in sync): flow=A->B kind=latest topic=orders partition=0 a=10800 b=5800"
    )


def test_sampled_offsets_are_exposed_per_cluster() -> None:
    h = Harness(FakeSampler((_latest(0, 10_000, 5_000), _consume("billing", 0, 8_000, 3_000))))
    h.ticks(1)
    offset = "ferry_monitor_offset"
    assert h.value(offset, flow="A->B", cluster="A", topic="orders", partition="0") == 10_000
    assert h.value(offset, flow="A->B", cluster="B", topic="orders", partition="0") == 5_000
    group = {"flow": "A->B", "group": "billing", "topic": "orders", "partition": "0"}
    assert h.value("ferry_monitor_group_offset", cluster="A", **group) == 8_000
    assert h.value("ferry_monitor_group_offset", cluster="B", **group) == 3_000
    assert h.alert() == 0
    assert h.alert(kind="consume", group="billing") == 0
    assert h.value("ferry_monitor_samples_total", flow="A->B") == 1
    assert h.value("ferry_monitor_period_seconds", flow="A->B") == 1
    assert h.value("ferry_monitor_last_sample_timestamp_seconds", flow="A->B") == pytest.approx(
        time.time(), abs=60
    )


def test_consume_alerts_carry_the_group_and_use_their_own_threshold() -> None:
    steps = [
        (_latest(0, 10_000 + i * 100, 5_000), _consume("billing", 0, 8_000 + i * 50, 3_000))
        for i in range(4)
    ]
    h = Harness(
        FakeSampler(*steps),
        monitor_min_delay_latest_offset=100,
        monitor_min_delay_consume_offset=10,
    )
    h.ticks(4)
    assert h.alert() == 0, "A grew 100, not more than the latest threshold"
    assert h.alert(kind="consume", group="billing") == 1
    assert h.raised("consume") == 1 and h.raised("latest") == 0
    assert h.lines == [
        "sync delay: flow=A->B kind=consume group=billing topic=orders partition=0 a_sub=50 "
        "b_sub=0 threshold=10 a=8150 b=3000"
    ]


def test_partitions_are_judged_separately() -> None:
    steps = [(_latest(0, 100 * i, 100 * i), _latest(1, 100 * i, 0)) for i in range(4)]
    h = Harness(FakeSampler(*steps))
    h.ticks(4)
    assert (h.alert(0), h.alert(1)) == (0, 1)


def test_a_series_that_disappears_is_forgotten_and_its_alert_resolved() -> None:
    stalled = [(_latest(0, 100 * i, 0), _latest(1, 0, 0)) for i in range(4)]
    h = Harness(FakeSampler(*stalled, (_latest(1, 0, 0),)))
    h.ticks(4)
    assert h.alert(0) == 1
    h.ticks(1)
    assert h.alert(0) is None, "the deleted partition's series are removed, not left at 1"
    offset = {"flow": "A->B", "cluster": "A", "topic": "orders"}
    assert h.value("ferry_monitor_offset", partition="0", **offset) is None
    assert h.value("ferry_monitor_offset", partition="1", **offset) == 0
    assert h.lines[-1].startswith("sync delay over (no longer sampled): flow=A->B kind=latest")


# --- failures ---------------------------------------------------------------------------------


def test_an_unreachable_cluster_costs_the_period_its_sample_and_is_logged_once() -> None:
    down = KafkaUnavailableError("B", "127.0.0.1:2", "Local: Broker transport failure")
    steps = _growing(6, 10_000, 5_000, 100, 0)
    h = Harness(FakeSampler(*steps[:2], down, down, down, *steps[2:]))

    h.ticks(5)
    assert h.value("ferry_monitor_sample_failures_total", flow="A->B", cluster="B") == 3
    assert h.value("ferry_monitor_samples_total", flow="A->B") == 2
    assert h.lines == [
        "flow A->B: no sample this period: cluster B (127.0.0.1:2) is unreachable: "
        "Local: Broker transport failure"
    ]
    h.ticks(1)
    assert h.lines[-1] == "flow A->B: sampling again"
    assert h.alert() == 0, "only three samples reached the detector"
    h.ticks(1)
    assert h.alert() == 1


def test_an_unexpected_sampler_error_is_logged_and_sampling_goes_on() -> None:
    h = Harness(FakeSampler(ValueError("odd answer"), (_latest(0, 1, 1),)))
    h.ticks(2)
    assert (
        h.lines[0] == "flow A->B: no sample this period: sampling failed: ValueError('odd answer')"
    )
    assert h.value("ferry_monitor_sample_failures_total", flow="A->B", cluster="") == 1
    assert h.value("ferry_monitor_samples_total", flow="A->B") == 1


# --- the loop ---------------------------------------------------------------------------------


def test_the_loop_samples_every_period_and_stops_on_request() -> None:
    times: list[float] = []
    health: list[tuple[bool, str]] = []
    service: MonitorService

    def record(flow: FlowConfig) -> FlowSample:
        times.append(time.monotonic())
        health.append(service.health())
        if len(times) == 2:
            service.request_stop()
        return FlowSample(flow.name, (_latest(0, 1, 1),))

    sampler = FakeSampler(record)
    service = MonitorService(_config(), sampler=sampler, log=lambda _line: None)
    assert service.health() == (False, "sampling loop not running")
    runner = threading.Thread(target=service.run)
    runner.start()
    runner.join(10)
    assert not runner.is_alive()
    assert len(times) == 2
    assert 0.9 <= times[1] - times[0] < 3.0, "one period (PT = 1 s) between samples"
    assert health == [(True, "ok"), (True, "ok")]
    assert service.health() == (False, "sampling loop not running")
    service.close()
    assert sampler.closed


def test_the_period_is_the_sync_interval_or_mm2s_default_when_syncing_is_off() -> None:
    assert period_of(FlowConfig(source="A", target="B")) == 60
    assert period_of(FlowConfig(source="A", target="B", sync_group_offsets_interval_seconds=5)) == 5
    off = FlowConfig(source="A", target="B", sync_group_offsets_interval_seconds=-1)
    assert period_of(off) == 60


def test_a_config_without_enabled_flows_is_refused() -> None:
    config = _config(enabled=False)
    with pytest.raises(FerryError, match="enables no flow"):
        MonitorService(config, sampler=FakeSampler(()))


def test_sample_once_reports_each_flow_or_why_it_has_no_sample() -> None:
    down = KafkaUnavailableError("A", "127.0.0.1:1", "timed out")
    ok = sample_once(_config(), FakeSampler((_latest(0, 7, 3),)))
    assert [(f.name, s) for f, s in ok] == [("A->B", FlowSample("A->B", (_latest(0, 7, 3),)))]
    failed = sample_once(_config(), FakeSampler(down))
    assert [(f.name, s) for f, s in failed] == [("A->B", down)]
