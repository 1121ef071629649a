"""The benchmark's pure helpers: percentiles, medians, perf tool output, MM2's settings."""

from __future__ import annotations

import pytest
from bench.java_tools import (
    consumer_settings,
    mm2_properties,
    parse_consumer_perf,
    parse_producer_perf,
    producer_settings,
)
from bench.latency import stamp_of, stamped_value
from bench.stats import latency_summary, median, median_rows, percentile, ratio

from ferry.engine.copy.client_settings import PRODUCER_DEFAULTS


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))  # 1..100
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([1, 2], 0.5) == 1


def test_percentile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1], 0)


def test_median_skips_missing_values() -> None:
    assert median([3, None, 1, 2]) == 2
    assert median([None]) is None
    assert median([1, 4]) == 2.5


def test_ratio_of_missing_or_zero_is_none() -> None:
    assert ratio(3, 2) == 1.5
    assert ratio(None, 2) is None
    assert ratio(3, 0) is None


def test_latency_summary() -> None:
    summary = latency_summary([float(x) for x in range(1000, 0, -1)])
    assert summary["count"] == 1000
    assert summary["p50_ms"] == 500
    assert summary["p99_ms"] == 990
    assert summary["max_ms"] == 1000


def test_stamped_values_keep_their_size_and_carry_the_timestamp() -> None:
    value = stamped_value(bytes(range(100)), 1_795_450_000_123)
    assert len(value) == 100
    assert stamp_of(value) == 1_795_450_000_123
    assert value[8:] == bytes(range(8, 100))


def test_producer_performance_summary() -> None:
    output = (
        "Reading payloads from: /x\nNumber of messages read: 8192\n"
        "100 records sent, 20.0 records/sec (0.02 MB/sec), 1.0 ms avg latency\n"
        "200000 records sent, 67204.3 records/sec (65.63 MB/sec), 63.82 ms avg latency, "
        "647.00 ms max latency, 43 ms 50th, 165 ms 95th, 242 ms 99th, 286 ms 99.9th.\n"
    )
    result = parse_producer_perf(output)
    assert (result.records, result.records_per_second) == (200000, 67204.3)


def test_consumer_performance_result() -> None:
    output = (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
        "2026-11-23 16:00:57:564, 2026-11-23 16:01:00:077, 196.5417, 78.2100, 200000, "
        "79586.1520, 800, 1713, 114.7354, 116754.2323\n"
    )
    result = parse_consumer_perf(output)
    assert (result.records, result.records_per_second) == (200000, 116754.2323)


def test_perf_output_without_a_result_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_producer_perf("Exception in thread main")
    with pytest.raises(ValueError):
        parse_consumer_perf("WARN nothing")


def test_java_clients_get_ferrys_settings() -> None:
    producer = producer_settings()
    assert producer["linger.ms"] == PRODUCER_DEFAULTS["linger.ms"]
    assert producer["batch.size"] == "1000000"
    assert producer["compression.type"] == "lz4"
    assert producer["acks"] == "all"
    assert producer["enable.idempotence"] == "true"
    consumer = consumer_settings()
    assert consumer["fetch.max.bytes"] == "52428800"
    assert consumer["max.partition.fetch.bytes"] == "1048576"
    assert consumer["isolation.level"] == "read_committed"


def test_mm2_copies_one_topic_with_one_task_per_partition_and_fresh_internal_topics() -> None:
    props = mm2_properties(("a:1", "b:2"), "bench-1", 8, "run1")
    assert props["A->B.topics"] == "bench-1"
    assert props["A->B.enabled"] == "true"
    assert props["B->A.enabled"] == "false"
    assert props["tasks.max"] == "8"
    assert props["B.producer.compression.type"] == "lz4"
    assert props["A.consumer.isolation.level"] == "read_committed"
    assert props["offset.storage.topic"] == "mm2-offsets-run1.internal"
    assert props["B.group.id"] == "mm2-run1"


def test_median_rows_give_each_name_the_median_of_its_runs_formatted() -> None:
    runs = {"a": [{"x": 1.0, "y": 10.0}, {"x": 3.0, "y": 30.0}, {"x": 2.0, "y": 1000.0}]}
    assert median_rows(runs, [("x", "{:.1f}"), ("y", "{:,.0f}")]) == ["| a | 2.0 | 30 |"]
