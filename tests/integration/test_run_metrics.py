"""`ferry run --metrics-port`: what a Prometheus scrape sees while a flow runs."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from ferry.config import load_config
from ferry.engine.runner import Runner
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count, wait_for
from tests.integration.replication_setup import run_beside, write_config


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_acked_records_latency_and_lag_per_partition(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    now = int(time.time() * 1000)
    produce(a, topic_name, [Rec(i % 2, None, b"v" * 100, (), now) for i in range(300)])
    runner = Runner(
        load_config(write_config(tmp_path, kafka_clusters, topics=topic_name)),
        spark=spark,
        metrics_port=0,
    )
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def scrape_when_copied() -> None:
        wait_for(lambda: record_count(b, f"A.{topic_name}") == 300, 120, "records copied")
        assert runner.metrics_url is not None
        sampled = len(range(0, 150, 16))

        def counted() -> bool:
            # Every counter asserted below at its final value in one scrape: each partition's
            # counters reach the endpoint with its own slice.
            seen.update(_scrape(runner.metrics_url or ""))
            return all(
                seen.get(_key("ferry_lag_records", topic_name, p)) == 0
                and seen.get(_key("ferry_records_copied_total", topic_name, p)) == 150
                and seen.get(_key("ferry_bytes_copied_total", topic_name, p)) == 150 * 100
                and seen.get(_key("ferry_record_age_ms_count", topic_name, p)) == sampled
                for p in (0, 1)
            )

        wait_for(counted, 60, "metrics show the copy")
        health = urllib.request.urlopen(runner.metrics_url.replace("metrics", "healthz"))
        assert health.status == 200

    run_beside(runner, scrape_when_copied)
    sampled = len(range(0, 150, 16))  # record age is timed on source offsets 0, 16, 32, ...
    for p in (0, 1):
        assert seen[_key("ferry_records_copied_total", topic_name, p)] == 150
        assert seen[_key("ferry_bytes_copied_total", topic_name, p)] == 150 * 100
        # Replication latency is timed on the first and last copy of each fetched chunk.
        timed = seen[_key("ferry_replication_latency_ms_count", topic_name, p)]
        assert 1 <= timed <= 150
        assert seen[_key("ferry_record_age_ms_count", topic_name, p)] == sampled
        # Produced moments ago: every record is older than 0 ms and younger than 5 minutes.
        inf = _key("ferry_replication_latency_ms_bucket", topic_name, p, le="+Inf")
        five_min = _key("ferry_replication_latency_ms_bucket", topic_name, p, le="300000")
        assert seen[inf] == seen[five_min] == timed
    # All of it was counted while the first lease still ran: no batch had ended yet.
    assert seen[("ferry_batches_total", (("flow", "A->B"),))] == 0
    # Who copies what: in local mode every task runs on the driver.
    executors = {dict(labels)["executor"] for name, labels in seen if name.startswith("ferry_exec")}
    assert executors == {"driver"}
    assert seen[_executor_key("ferry_executor_records_copied_total")] == 300
    assert seen[_executor_key("ferry_executor_partitions")] == 2


def _key(
    name: str, topic: str, partition: int, **extra: str
) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"flow": "A->B", "topic": topic, "partition": str(partition), **extra}
    return (name, tuple(sorted(labels.items())))


def _executor_key(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"flow": "A->B", "executor": "driver", "host": socket.gethostname()}
    return (name, tuple(sorted(labels.items())))
