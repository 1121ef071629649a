"""The recovery point objective, `ferry_rpo_seconds`, on the session's clusters A and B.

Records copied: RPO 0. ferry stopped while a producer writes to A: the RPO rises, through
`ferry status --json` and through `ferry monitor`'s Prometheus endpoint (the monitor's
service sampling in the test's thread, so the test knows when each sample began; its server
on a free port, scraped over HTTP), and is at least the age of the oldest
acknowledged record not copied; an aborted transaction just past the replicated position (its
records stamped an hour ago) is not a record to lose, so it does not count. ferry copies again
(`ferry run --once` in process, on the session's Spark) and the RPO returns to 0. ferry run's
own figure (its RPO watch, read by its `/metrics` and its API) is measured at the same points.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from ferry.api.views import flow_summary, partition_rows
from ferry.config import FerryConfig, load_config
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.engine.rpo_watch import INTERVAL_SECONDS, RpoWatch, read_rpo
from ferry.engine.runner import Runner
from ferry.flows.status import Condition
from ferry.http.metrics_server import MetricsServer
from ferry.local.cluster import LocalCluster
from ferry.monitor.service import MonitorService
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for
from tests.integration.replication_setup import run_beside, write_config

pytestmark = [pytest.mark.integration, pytest.mark.dr]

PARTITIONS = 3
HOUR_MS = 3_600_000


def _rpo_of(text: str, topic: str) -> dict[int, float]:
    """`ferry_rpo_seconds` of flow A->B and `topic` by partition, in Prometheus text."""
    return {
        int(s.labels["partition"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ferry_rpo_seconds"
        and s.labels["flow"] == "A->B"
        and s.labels["topic"] == topic
    }


class _Monitor:
    """`ferry monitor`'s service, one period per `sample()`, its metrics on a free port."""

    def __init__(self, config: FerryConfig) -> None:
        self.service = MonitorService(config, log=lambda _line: None)
        self.flow = config.flow("A", "B")
        self.server = MetricsServer(self.service.metrics.registry, lambda: (True, "ok"), port=0)
        self.server.start()

    def sample(self) -> None:
        self.service.tick(self.flow)

    def rpo(self, topic: str) -> dict[int, float]:
        """`ferry_rpo_seconds` of `topic` by partition, scraped as Prometheus does."""
        url = f"http://127.0.0.1:{self.server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return _rpo_of(response.read().decode(), topic)

    def stop(self) -> None:
        self.server.stop()
        self.service.close()


def _status(config: Path) -> dict[str, Any]:
    result = run_ferry("status", "-c", str(config), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    flow: dict[str, Any] = json.loads(result.stdout)["flows"]["A->B"]
    assert flow["errors"] == []
    return flow


def _copy(config: Path) -> None:
    result = run_ferry("run", "-c", str(config), "--once", timeout=240)
    assert result.returncode == 0, result.stderr


def _run_view(config: FerryConfig, topic: str) -> tuple[float | None, dict[int, float | None]]:
    """ferry run's RPO watch, measured once now: the API's flow figure and partition rows."""
    flow = config.flow("A", "B")
    state = FlowState(flow_state_dir(config.state_dir.resolve(), flow))
    RpoWatch(config, [(flow, state)]).measure(flow, state)
    assert read_rpo(state).at is not None
    rows = {r["partition"]: r["rpo_seconds"] for r in partition_rows(state) if r["topic"] == topic}
    return flow_summary(flow, state, state.control(), Condition())["rpo_seconds"], rows


def _aborted(bootstrap: str, topic: str, partition: int, stamp_ms: int) -> None:
    """Records of a transaction that aborts, then its marker: offsets with nothing to lose."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"rpo-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for _ in range(5):
        producer.produce(topic, b"aborted", partition=partition, timestamp=stamp_ms)
    producer.flush(30)
    producer.abort_transaction(30)


def test_rpo_rises_while_ferry_is_stopped_and_returns_to_zero_once_it_copies(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    now_ms = int(time.time() * 1000)
    produce(a, topic_name, [Rec(i % PARTITIONS, b"k", b"v", (), now_ms) for i in range(300)])
    config = write_config(
        tmp_path, kafka_clusters, topics=topic_name, **{"sync.group.offsets.interval.seconds": 1}
    )
    _copy(config)

    # Copied: 0 everywhere, in ferry status and in ferry monitor's gauge.
    flow = _status(config)
    assert flow["lag"] == 0
    assert flow["rpo_seconds"] == 0
    assert [p["rpo_seconds"] for p in flow["partitions"]] == [0] * PARTITIONS
    monitor = _Monitor(load_config(config))
    try:
        monitor.sample()
        assert monitor.rpo(topic_name) == {p: 0.0 for p in range(PARTITIONS)}

        # ferry stopped; A takes records: an aborted transaction on partition 0 first (stamped
        # an hour ago), then acknowledged records on partitions 0 and 1, none on 2.
        _aborted(a, topic_name, 0, int(time.time() * 1000) - HOUR_MS)
        oldest_ms = int(time.time() * 1000)
        produce(a, topic_name, [Rec(i % 2, b"k", b"late", (), oldest_ms) for i in range(40)])

        def age(at_ms: float) -> float:
            return (at_ms - oldest_ms) / 1000.0

        # ferry status: at least the age of the oldest record not copied, rising while
        # nothing copies; partition 2 has nothing to copy; the aborted records do not count.
        first: dict[str, Any] = {}

        def status_rose() -> bool:
            asked_ms = time.time() * 1000
            flow = _status(config)
            rpos = {p["partition"]: p["rpo_seconds"] for p in flow["partitions"]}
            assert rpos[2] == 0
            for partition in (0, 1):
                assert rpos[partition] is not None, "the first record not copied was not read"
                assert rpos[partition] >= age(asked_ms)
                assert rpos[partition] < HOUR_MS / 2000, "an aborted record counted"
            assert flow["rpo_seconds"] == max(rpos.values())
            if not first:
                first.update(rpos=flow["rpo_seconds"])
                return False
            return bool(flow["rpo_seconds"] > first["rpos"] and flow["rpo_seconds"] >= 1.0)

        wait_for(status_rose, 120, "ferry status's RPO rising while ferry is stopped")

        # ferry monitor's gauge: the same, rising from one sample to the next.
        seen: list[float] = []

        def gauge_rose() -> bool:
            sampled_ms = time.time() * 1000
            monitor.sample()
            rpos = monitor.rpo(topic_name)
            assert not any(math.isnan(v) for v in rpos.values()), rpos
            assert rpos[2] == 0.0
            for partition in (0, 1):
                assert rpos[partition] >= age(sampled_ms)
                assert rpos[partition] < HOUR_MS / 2000, "an aborted record counted"
            seen.append(max(rpos.values()))
            return len(seen) >= 2 and seen[-1] > seen[0] and seen[-1] >= 2.0

        wait_for(gauge_rose, 120, "ferry_rpo_seconds rising above 2 s while ferry is stopped")

        # ferry run's figure (its positions from its state dir): the same rule, the same reads.
        # A measurement whose reads ran out of time says unknown (None), never a wrong figure:
        # every figure it gives is checked, and it is measured again until all are known.
        def run_view_measured() -> bool:
            measured_ms = time.time() * 1000
            worst, rows = _run_view(load_config(config), topic_name)
            assert rows[2] in (0, None)
            for partition in (0, 1):
                if rows[partition] is not None:
                    assert rows[partition] >= age(measured_ms)
                    assert rows[partition] < HOUR_MS / 2000, "an aborted record counted"
            if None in rows.values():
                assert worst is None, "a flow with an unknown partition has an unknown RPO"
                return False
            assert worst == max(rows.values())
            return True

        wait_for(run_view_measured, 120, "ferry run's RPO watch measuring every partition")

        _copy(config)
        flow = _status(config)
        assert flow["lag"] == 0
        assert flow["rpo_seconds"] == 0
        assert [p["rpo_seconds"] for p in flow["partitions"]] == [0] * PARTITIONS
        monitor.sample()
        assert monitor.rpo(topic_name) == {p: 0.0 for p in range(PARTITIONS)}

        def run_view_at_zero() -> bool:
            worst, rows = _run_view(load_config(config), topic_name)
            assert set(rows.values()) <= {0, None}, rows
            return (worst, rows) == (0, dict.fromkeys(range(PARTITIONS), 0))

        wait_for(run_view_at_zero, 120, "ferry run's RPO watch measuring 0 for every partition")
    finally:
        monitor.stop()


def test_ferry_runs_own_metrics_serve_the_rpo_of_each_partition(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, b"k", b"v", (), int(time.time() * 1000)) for i in range(50)])
    runner = Runner(
        load_config(write_config(tmp_path, kafka_clusters, topics=topic_name)),
        spark=spark,
        metrics_port=0,
    )

    def rpo_served() -> None:
        def caught_up() -> bool:
            if runner.metrics_url is None:
                return False
            with urllib.request.urlopen(runner.metrics_url, timeout=10) as response:
                return _rpo_of(response.read().decode(), topic_name) == {0: 0.0, 1: 0.0}

        # Measured every INTERVAL_SECONDS from the start: a few intervals at most.
        wait_for(caught_up, 6 * INTERVAL_SECONDS + 60, "ferry run's ferry_rpo_seconds at 0")

    run_beside(runner, rpo_served)
