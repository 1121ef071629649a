"""What `ferry monitor`'s continuous audit exposes, in the monitor's own registry.

`topic` names the source topic on the flow's source cluster, as in the sync-delay metrics.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge

from ferry.audit.model import TopicResult

__all__ = ["AuditMetrics"]


class AuditMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.missing = Gauge(
            "ferry_audit_missing_records",
            "Source records in closed buckets, below the flow's replicated position, with no "
            "copy on the target, as of the last audit round",
            ["flow", "topic"],
            registry=r,
        )
        self.duplicated = Gauge(
            "ferry_audit_duplicated_records",
            "Extra copies on the target of source records in closed buckets, as of the last "
            "audit round",
            ["flow", "topic"],
            registry=r,
        )
        self.in_flight = Gauge(
            "ferry_audit_in_flight_records",
            "Source records in closed buckets not copied yet and at or after the flow's "
            "replicated position (not missing), as of the last audit round",
            ["flow", "topic"],
            registry=r,
        )
        self.alerts_total = Counter(
            "ferry_audit_alerts",
            "Audit alerts raised (a topic's missing records rising from one round to the next)",
            ["flow"],
            registry=r,
        )
        self.rounds_total = Counter(
            "ferry_audit_rounds",
            "Audit rounds that compared the flow's topics",
            ["flow"],
            registry=r,
        )
        self.failures_total = Counter(
            "ferry_audit_round_failures",
            "Audit rounds that did not finish (cluster unreachable, Spark job failed)",
            ["flow"],
            registry=r,
        )
        self.last_round = Gauge(
            "ferry_audit_last_round_timestamp_seconds",
            "Unix time of the flow's last finished audit round",
            ["flow"],
            registry=r,
        )
        self.audited_until = Gauge(
            "ferry_audit_audited_until_timestamp_seconds",
            "End of the newest closed bucket the last round audited (record timestamps before it)",
            ["flow"],
            registry=r,
        )
        self.interval = Gauge(
            "ferry_audit_interval_seconds",
            "The flow's audit period and bucket width (audit.interval.seconds)",
            ["flow"],
            registry=r,
        )

    def register_flow(self, flow: str, interval: int) -> None:
        """Series that exist from the start, so rate() and absent() work before a round."""
        self.interval.labels(flow).set(interval)
        for counter in (self.alerts_total, self.rounds_total, self.failures_total):
            counter.labels(flow)

    def record(self, flow: str, topics: list[TopicResult], until_ms: int, now: float) -> None:
        for t in topics:
            self.missing.labels(flow, t.topic).set(t.missing)
            self.duplicated.labels(flow, t.topic).set(t.duplicated)
            self.in_flight.labels(flow, t.topic).set(t.in_flight)
        self.rounds_total.labels(flow).inc()
        self.last_round.labels(flow).set(now)
        self.audited_until.labels(flow).set(until_ms / 1000)

    def forget(self, flow: str, topic: str) -> None:
        """Drop the series of a topic the flow no longer replicates."""
        for gauge in (self.missing, self.duplicated, self.in_flight):
            with contextlib.suppress(KeyError):
                gauge.remove(flow, topic)
