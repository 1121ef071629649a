"""What `ferry monitor` exposes to Prometheus (served by `ferry.http.metrics_server`).

One registry per monitor (not prometheus-client's global one), so tests can run several
monitors in one process.

Labels: `topic` and `partition` always name the source partition on A; B's numbers are those
of its remote copy. `group` is set for `consume` series and empty for `latest` ones, so one
alert gauge covers both kinds (Prometheus treats an empty label as absent).

`ferry_rpo_seconds` is NaN, never 0, while a partition's RPO is not known: 0 would say that
nothing is at risk.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from ferry.flows.rpo import DESCRIPTION
from ferry.monitor.sampler import OffsetPair

__all__ = ["DEFAULT_PORT", "MonitorMetrics"]

DEFAULT_PORT = 9464


class MonitorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.alert = Gauge(
            "ferry_sync_delay_alert",
            "1 while the sliding-window sync-delay rule says the series is in sync delay, else 0",
            ["flow", "kind", "group", "topic", "partition"],
            registry=r,
        )
        self.alerts_total = Counter(
            "ferry_sync_delay_alerts",
            "Sync-delay alerts raised (a series going from 0 to 1)",
            ["flow", "kind"],
            registry=r,
        )
        self.offset = Gauge(
            "ferry_monitor_offset",
            "Log end offset (high watermark) sampled on each cluster",
            ["flow", "cluster", "topic", "partition"],
            registry=r,
        )
        self.group_offset = Gauge(
            "ferry_monitor_group_offset",
            "Committed offset of a consumer group sampled on each cluster",
            ["flow", "cluster", "group", "topic", "partition"],
            registry=r,
        )
        self.samples_total = Counter(
            "ferry_monitor_samples",
            "Sampling passes that reached both clusters of the flow",
            ["flow"],
            registry=r,
        )
        self.failures_total = Counter(
            "ferry_monitor_sample_failures",
            "Sampling passes that got no sample (cluster unreachable or other error)",
            ["flow", "cluster"],
            registry=r,
        )
        self.last_sample = Gauge(
            "ferry_monitor_last_sample_timestamp_seconds",
            "Unix time of the flow's last successful sampling pass",
            ["flow"],
            registry=r,
        )
        self.period = Gauge(
            "ferry_monitor_period_seconds",
            "Sampling period PT of the flow (sync.group.offsets.interval.seconds)",
            ["flow"],
            registry=r,
        )
        self.rpo = Gauge(
            "ferry_rpo_seconds", DESCRIPTION, ["flow", "topic", "partition"], registry=r
        )
        self._rpo_series: dict[str, set[tuple[str, int]]] = {}

    def register_flow(self, flow: str, source: str, target: str, period: float) -> None:
        """Series that exist from the start, so rate() and absent() work before any alert."""
        self.period.labels(flow).set(period)
        self.samples_total.labels(flow)
        for kind in ("latest", "consume"):
            self.alerts_total.labels(flow, kind)
        for cluster in (source, target):
            self.failures_total.labels(flow, cluster)

    def record(self, flow: str, source: str, target: str, pair: OffsetPair, alerting: bool) -> None:
        kind, group, partition = pair.kind.value, pair.group or "", str(pair.partition)
        self.alert.labels(flow, kind, group, pair.topic, partition).set(1 if alerting else 0)
        for cluster, value in ((source, pair.a), (target, pair.b)):
            if pair.group is None:
                self.offset.labels(flow, cluster, pair.topic, partition).set(value)
            else:
                self.group_offset.labels(flow, cluster, pair.group, pair.topic, partition).set(
                    value
                )

    def forget(self, flow: str, source: str, target: str, pair: OffsetPair) -> None:
        """Drop the series of a partition or group offset that is no longer sampled."""
        kind, group, partition = pair.kind.value, pair.group or "", str(pair.partition)
        _remove(self.alert, flow, kind, group, pair.topic, partition)
        for cluster in (source, target):
            if pair.group is None:
                _remove(self.offset, flow, cluster, pair.topic, partition)
            else:
                _remove(self.group_offset, flow, cluster, pair.group, pair.topic, partition)

    def record_rpo(self, flow: str, rpos: Mapping[tuple[str, int], float | None]) -> None:
        """Each partition's RPO (NaN: not known); partitions no longer replicated go."""
        for topic, partition in self._rpo_series.get(flow, set()) - rpos.keys():
            _remove(self.rpo, flow, topic, str(partition))
        for (topic, partition), rpo in rpos.items():
            self.rpo.labels(flow, topic, str(partition)).set(math.nan if rpo is None else rpo)
        self._rpo_series[flow] = set(rpos)

    def rpo_unknown(self, flow: str) -> None:
        """A period that read no RPO: each partition's is not known now (NaN), not its last."""
        for topic, partition in self._rpo_series.get(flow, set()):
            self.rpo.labels(flow, topic, str(partition)).set(math.nan)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _remove(metric: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)
