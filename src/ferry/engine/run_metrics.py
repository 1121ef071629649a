"""What `ferry run --metrics-port` exposes, with MM2's meanings, read from each flow's stats.

Counters and histograms come from the flow state (written after the target acked a batch, or
a lease's slice), so a scrape never sees a record counted that was not acknowledged. Labels:
flow, topic (the source topic) and partition.

    ferry_records_copied_total / ferry_bytes_copied_total      (MM2: record-count, byte-count)
    ferry_replication_latency_ms   histogram (MM2: replication-latency-ms: ack time - timestamp)
    ferry_record_age_ms            histogram (MM2: record-age-ms: consume time - timestamp)
    ferry_lag_records              gauge, records on the source not yet copied
    ferry_source_records_lost_total  records the source removed (retention, DeleteRecords)
                                   before ferry copied them: a gap in the copy, never silent
    ferry_batch_duration_seconds   gauge, the last batch's slowest task
    ferry_batches_total, ferry_errors_total{kind}
    ferry_lease_gap_seconds, ferry_lease_gap_max_seconds   gauges: nobody copied in between
    ferry_executor_records_copied_total, ferry_executor_records_per_second,
    ferry_executor_partitions      by Spark executor (label executor, host): who copies what

The two histograms time 1 record in 16 (source offsets that are multiples of 16, see copier).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ferry.engine.flow_state import FlowState
from ferry.engine.latency import Histogram

__all__ = ["RunMetrics"]

_LABELS = ["flow", "topic", "partition"]


class RunMetrics(Collector):
    def __init__(self, flows: Callable[[], list[tuple[str, FlowState, dict[str, int]]]]) -> None:
        """`flows()` gives (flow name, its state, error counts by kind) at scrape time."""
        self._flows = flows

    def collect(self) -> Iterator[Metric]:
        records = CounterMetricFamily(
            "ferry_records_copied", "Records copied and acknowledged by the target", labels=_LABELS
        )
        size = CounterMetricFamily(
            "ferry_bytes_copied", "Key and value bytes copied and acknowledged", labels=_LABELS
        )
        latency = HistogramMetricFamily(
            "ferry_replication_latency_ms",
            "Target acknowledgement time minus the record's timestamp (ms), 1 record in 16",
            labels=_LABELS,
        )
        age = HistogramMetricFamily(
            "ferry_record_age_ms",
            "Consume time minus the record's timestamp (ms), 1 record in 16",
            labels=_LABELS,
        )
        lost = CounterMetricFamily(
            "ferry_source_records_lost",
            "Records removed from the source by retention or deletion (DeleteRecords) before "
            "ferry copied them: they are not on the target and cannot be copied any more",
            labels=_LABELS,
        )
        lag = GaugeMetricFamily(
            "ferry_lag_records", "Records on the source not yet copied", labels=_LABELS
        )
        batch = GaugeMetricFamily(
            "ferry_batch_duration_seconds", "Slowest task of the last batch", labels=["flow"]
        )
        batches = CounterMetricFamily(
            "ferry_batches", "Leases (or bounded micro-batches) that ended", labels=["flow"]
        )
        gap = GaugeMetricFamily(
            "ferry_lease_gap_seconds",
            "Between the last two leases: from the last task of one ending to the first of the "
            "next starting (nothing is copied then)",
            labels=["flow"],
        )
        worst_gap = GaugeMetricFamily(
            "ferry_lease_gap_max_seconds", "The longest gap between two leases", labels=["flow"]
        )
        errors = CounterMetricFamily(
            "ferry_errors", "Flow failures, by kind (retried or fatal)", labels=["flow", "kind"]
        )
        where = ["flow", "executor", "host"]
        by_executor = CounterMetricFamily(
            "ferry_executor_records_copied",
            "Records copied and acknowledged, by the Spark executor that copied them",
            labels=where,
        )
        executor_rate = GaugeMetricFamily(
            "ferry_executor_records_per_second",
            "Copy rate of an executor's running leased tasks, since they began",
            labels=where,
        )
        executor_partitions = GaugeMetricFamily(
            "ferry_executor_partitions",
            "Source partitions an executor's running leased tasks copy",
            labels=where,
        )
        for name, state, error_counts in self._flows():
            stats = state.stats()
            for key, entry in stats.get("partitions", {}).items():
                topic, _, partition = key.rpartition(":")
                labels = [name, topic, partition]
                records.add_metric(labels, entry.get("records", 0))
                lost.add_metric(labels, entry.get("expired", 0))
                size.add_metric(labels, entry.get("bytes", 0))
                for family, field in ((latency, "latency"), (age, "record_age")):
                    histogram = Histogram.from_json(entry.get(field))
                    family.add_metric(labels, histogram.cumulative(), histogram.total)
            for key, behind in state.partition_lags(stats).items():
                topic, _, partition = key.rpartition(":")
                lag.add_metric([name, topic, partition], behind)
            batch.add_metric([name], stats.get("last_batch_seconds", 0.0))
            batches.add_metric([name], stats.get("batches", 0))
            if "lease_gap_seconds" in stats:
                gap.add_metric([name], stats["lease_gap_seconds"])
                worst_gap.add_metric([name], stats["lease_gap_max_seconds"])
            for kind, count in error_counts.items():
                errors.add_metric([name, kind], count)
            for executor, e in state.executors().items():
                labels = [name, executor, e.host]
                by_executor.add_metric(labels, e.records)
                executor_rate.add_metric(labels, e.records_per_second)
                executor_partitions.add_metric(labels, len(e.partitions))
        yield from (records, size, latency, age, lost, lag, batch, batches, gap, worst_gap)
        yield errors
        yield from (by_executor, executor_rate, executor_partitions)
