"""`ferry monitor`'s continuous audit: `ferry audit` every `audit.interval.seconds`, per flow.

It runs in a thread of its own, so a round (a Spark job over both clusters' topics, seconds
to minutes) never delays the sync-delay samples. One Spark session serves every round for the
monitor's life: a session costs a JVM and 10 to 20 s to start, more than a round on small
topics. It is started by the first round, in this thread (so pyspark leaves the main thread's
SIGINT handler alone), and stopped by `close`. Which records a round audits and when it
alerts is in `audit_rounds`; the findings reach the gauges of `audit_metrics` and, like the
sync-delay alerts, stderr and the webhook.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ferry.audit.model import TopicResult
from ferry.audit.spark_job import audit_flow, audit_session
from ferry.config.model import FerryConfig, FlowConfig
from ferry.errors import KafkaUnavailableError
from ferry.monitor.audit_metrics import AuditMetrics
from ferry.monitor.audit_rounds import AuditAlerts, closed_until
from ferry.monitor.webhook import Webhook

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Audit", "AuditLoop", "audit_round"]

# A round's job: (session, config, flow, bucket width ms, until ms) -> per-topic results.
Audit = Callable[["SparkSession", FerryConfig, FlowConfig, int, int], list[TopicResult]]
RANGES_IN_EVENT = 10  # missing ranges quoted in a log line or webhook event


def audit_round(
    spark: SparkSession, config: FerryConfig, flow: FlowConfig, bucket_ms: int, until_ms: int
) -> list[TopicResult]:
    """One `ferry audit --flow F --until U --bucket B` on `spark`."""
    from ferry.audit.chain import plan_chain

    plan = plan_chain(config, [flow], ".*")
    return audit_flow(spark, plan, bucket_ms=bucket_ms, until_ms=until_ms)


class AuditLoop:
    def __init__(
        self,
        config: FerryConfig,
        metrics: AuditMetrics,
        log: Callable[[str], None],
        webhook: Webhook | None = None,
        *,
        session: Callable[[FerryConfig], SparkSession] = audit_session,
        audit: Audit = audit_round,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.flows = [f for f in config.enabled_flows if f.audit_interval_seconds]
        self.metrics = metrics
        self._log = log
        self._webhook = webhook
        self._session = session
        self._audit = audit
        self._clock = clock
        self._spark: SparkSession | None = None
        self._alerts = AuditAlerts()
        self._topics: dict[str, set[str]] = {}
        self._failing: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for f in self.flows:
            self.metrics.register_flow(f.name, _interval(f))

    # --- one round ------------------------------------------------------------------------

    def round(self, flow: FlowConfig) -> None:
        """Audit `flow`'s closed buckets once; gauges, alerts and recoveries follow."""
        width_ms = _interval(flow) * 1000
        until_ms = closed_until(int(self._clock() * 1000), width_ms)
        try:
            if self._spark is None:
                self._spark = self._session(self.config)
            if self._stop.is_set():
                return
            topics = self._audit(self._spark, self.config, flow, width_ms, until_ms)
        except Exception as exc:  # a cluster down or a failed job costs one round, no more
            if self._stop.is_set():
                return  # cancelled by close()
            self.metrics.failures_total.labels(flow.name).inc()
            why = str(exc) if isinstance(exc, KafkaUnavailableError) else repr(exc)
            if self._failing.get(flow.name) != why:
                self._log(f"flow {flow.name}: no audit this round: {why}")
            self._failing[flow.name] = why
            return
        if self._failing.pop(flow.name, None) is not None:
            self._log(f"flow {flow.name}: auditing again")
        self.metrics.record(flow.name, topics, until_ms, self._clock())
        by_name = {t.topic: t for t in topics}
        verdict = self._alerts.judge(flow.name, {t.topic: t.missing for t in topics})
        for name in verdict.gone:
            self.metrics.forget(flow.name, name)
        for name in verdict.raised:
            self._raised(flow, by_name[name], until_ms)
        for name in verdict.recovered:
            reason = "no longer audited" if name in verdict.gone else "none missing"
            self._log(f"audit alert over ({reason}): flow={flow.name} topic={name}")
            self._notify({"event": "recovery", "flow": flow.name, "topic": name, "reason": reason})

    def _raised(self, flow: FlowConfig, topic: TopicResult, until_ms: int) -> None:
        self.metrics.alerts_total.labels(flow.name).inc()
        ranges = topic.missing_ranges[:RANGES_IN_EVENT]
        shown = ", ".join(f"{r['partition']}:{r['first']}-{r['last']}" for r in ranges)
        until = datetime.fromtimestamp(until_ms / 1000, UTC).isoformat(timespec="seconds")
        self._log(
            f"audit: records missing: flow={flow.name} topic={topic.topic} "
            f"remote_topic={topic.remote_topic} missing={topic.missing} "
            f"duplicated={topic.duplicated} before={until} partition:offsets {shown}"
            + (" ..." if len(topic.missing_ranges) > len(ranges) or topic.ranges_truncated else "")
        )
        self._notify(
            {
                "event": "alert",
                "flow": flow.name,
                "topic": topic.topic,
                "remote_topic": topic.remote_topic,
                "missing": topic.missing,
                "duplicated": topic.duplicated,
                "missing_ranges": ranges,
                "audited_until": until,
            }
        )

    def _notify(self, event: dict[str, Any]) -> None:
        if self._webhook is not None:
            self._webhook.send(
                {
                    **event,
                    "kind": "audit",
                    "time": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            )

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """Audit every flow every interval until `request_stop`; a round that overruns is
        followed at once by the next due one."""
        due = dict.fromkeys((f.name for f in self.flows), time.monotonic())
        while not self._stop.is_set():
            for flow in self.flows:
                if not self._stop.is_set() and time.monotonic() >= due[flow.name]:
                    self.round(flow)
                    due[flow.name] = max(due[flow.name] + _interval(flow), time.monotonic())
            self._stop.wait(max(0.0, min(due.values()) - time.monotonic()))

    def start(self) -> AuditLoop:
        self._thread = threading.Thread(target=self.run, name="ferry-audit", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout: float = 60.0) -> None:
        """Stop after the running round (its Spark jobs cancelled), then stop the session."""
        self._stop.set()
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._spark is not None:  # started meanwhile, maybe
            self._spark.stop()
            self._spark = None


def _interval(flow: FlowConfig) -> int:
    assert flow.audit_interval_seconds is not None, "only flows with an interval are audited"
    return flow.audit_interval_seconds
