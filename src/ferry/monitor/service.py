"""`ferry monitor`: sample every enabled flow each period, judge it, report what changed.

A replicator can be alive and copy nothing, so the monitor watches offsets from the outside,
never ferry's own state. Each flow is sampled every PT seconds (its
`sync.group.offsets.interval.seconds`, MM2's sync interval, which the rule is defined on);
every sample feeds the flow's `SyncDelayDetector`. An alert (a series going from in sync to
delayed) and a recovery are each logged once, counted and optionally POSTed to a webhook;
the alert gauge says the current state at every scrape.

A cluster that does not answer costs that flow its sample for the period, nothing more: the
loop logs it (once until it changes) and tries again next period.

Flows with `audit.interval.seconds` are also audited, in a thread of their own
(`ferry.monitor.audit_loop`), into the same registry and through the same webhook.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ferry.config.model import FerryConfig, FlowConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.http.metrics_server import MetricsServer
from ferry.monitor.audit_loop import AuditLoop
from ferry.monitor.audit_metrics import AuditMetrics
from ferry.monitor.metrics import DEFAULT_PORT, MonitorMetrics
from ferry.monitor.sampler import FlowSample, KafkaSampler, OffsetPair, Sampler
from ferry.monitor.sync_delay import Alert, DelayKind, SyncDelayDetector
from ferry.monitor.webhook import Webhook
from ferry.signals import stop_on_signals

__all__ = [
    "DEFAULT_PERIOD_SECONDS",
    "MonitorService",
    "period_of",
    "sample_once",
    "serve",
    "stderr_log",
]

DEFAULT_PERIOD_SECONDS = 60  # MM2's default sync.group.offsets.interval.seconds
MIN_STALE_SECONDS = 60.0  # a pass against a dying cluster may wait on several client timeouts

Log = Callable[[str], None]
SeriesId = tuple[DelayKind, tuple[object, ...]]


def stderr_log(line: str) -> None:
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} {line}", file=sys.stderr, flush=True)


def period_of(flow: FlowConfig) -> int:
    """PT: the flow's sync interval; MM2's default when the interval turns syncing off."""
    interval = flow.sync_group_offsets_interval_seconds
    return interval if interval > 0 else DEFAULT_PERIOD_SECONDS


def _series_key(flow: FlowConfig, pair: OffsetPair) -> tuple[object, ...]:
    if pair.group is None:
        return (flow.name, pair.topic, pair.partition)
    return (flow.name, pair.group, pair.topic, pair.partition)


def _describe(flow: FlowConfig, pair: OffsetPair) -> str:
    group = "" if pair.group is None else f" group={pair.group}"
    return (
        f"flow={flow.name} kind={pair.kind.value}{group} topic={pair.topic} "
        f"partition={pair.partition}"
    )


def _series_fields(flow: FlowConfig, pair: OffsetPair) -> dict[str, Any]:
    """A series and its latest offsets, as the webhook and the API's alerts name them."""
    return {
        "flow": flow.name,
        "kind": pair.kind.value,
        "group": pair.group,
        "topic": pair.topic,
        "remote_topic": pair.remote_topic,
        "partition": pair.partition,
        "a_offset": pair.a,
        "b_offset": pair.b,
    }


def _alert_fields(flow: FlowConfig, pair: OffsetPair, alert: Alert) -> dict[str, Any]:
    return {
        **_series_fields(flow, pair),
        "a_sub": alert.a_sub,
        "b_sub": alert.b_sub,
        "threshold": alert.threshold,
        "description": _describe(flow, pair),
    }


class MonitorService:
    """The sampling loop; `tick` is one period of one flow, `run` repeats it until stopped."""

    def __init__(
        self,
        config: FerryConfig,
        *,
        sampler: Sampler | None = None,
        metrics: MonitorMetrics | None = None,
        log: Log = stderr_log,
        webhook: Webhook | None = None,
    ) -> None:
        if not config.enabled_flows:
            raise FerryError(
                f"{config.path or 'the config'} enables no flow to monitor; set e.g. "
                f"'{next(iter(config.clusters), 'A')}->B.enabled = true'"
            )
        self.config = config
        self.flows = config.enabled_flows
        self.sampler: Sampler = sampler or KafkaSampler(config)
        self.metrics = metrics or MonitorMetrics()
        self._log = log
        self._webhook = webhook
        self._detectors = {
            f.name: SyncDelayDetector(
                min_delay_latest_offset=f.monitor_min_delay_latest_offset,
                min_delay_consume_offset=f.monitor_min_delay_consume_offset,
            )
            for f in self.flows
        }
        self._series: dict[str, dict[SeriesId, OffsetPair]] = {f.name: {} for f in self.flows}
        self._failing: dict[str, str] = {}  # flow -> what cost its last pass the sample
        # Per flow, its series in sync delay now (replaced whole, so readers on another
        # thread, the API's, see one sample's list or the next's).
        self._alerting: dict[str, list[dict[str, Any]]] = {f.name: [] for f in self.flows}
        for f in self.flows:
            self.metrics.register_flow(f.name, f.source, f.target, period_of(f))
        self._stop = threading.Event()
        self._running = False
        self._beat = 0.0
        self._stale_after = max(MIN_STALE_SECONDS, 3.0 * max(period_of(f) for f in self.flows))

    # --- one period -----------------------------------------------------------------------

    def tick(self, flow: FlowConfig) -> None:
        """Sample `flow` once, feed its detector, update metrics, report what changed."""
        try:
            sample = self.sampler.sample(flow)
        except KafkaUnavailableError as exc:
            self._no_sample(flow, exc.cluster, str(exc), f"cluster {exc.cluster}")
            return
        except Exception as exc:  # a bug or an odd broker answer must not end the monitor
            why = f"sampling failed: {exc!r}"
            self._no_sample(flow, "", why, why)
            return
        if self._failing.pop(flow.name, None) is not None:
            self._log(f"flow {flow.name}: sampling again")
        self._judge(flow, sample)
        if sample.rpos is None:
            self.metrics.rpo_unknown(flow.name)
        else:
            self.metrics.record_rpo(flow.name, sample.rpos)
        self.metrics.samples_total.labels(flow.name).inc()
        self.metrics.last_sample.labels(flow.name).set(time.time())

    def _no_sample(self, flow: FlowConfig, cluster: str, why: str, cause: str) -> None:
        self.metrics.failures_total.labels(flow.name, cluster).inc()
        self.metrics.rpo_unknown(flow.name)
        # Once per cause: librdkafka words the same outage differently from one call to the next.
        if self._failing.get(flow.name) != cause:
            self._log(f"flow {flow.name}: no sample this period: {why}")
        self._failing[flow.name] = cause

    def _judge(self, flow: FlowConfig, sample: FlowSample) -> None:
        detector = self._detectors[flow.name]
        was_alerting = detector.alerting()
        previous = self._series[flow.name]
        current: dict[SeriesId, OffsetPair] = {}
        for pair in sample.pairs:
            series = (pair.kind, _series_key(flow, pair))
            current[series] = pair
            alert = detector.observe(*series, pair.a, pair.b)
            self.metrics.record(flow.name, flow.source, flow.target, pair, alert is not None)
            if alert is not None and series not in was_alerting:
                self._raised(flow, pair, alert)
            elif alert is None and series in was_alerting:
                self._recovered(flow, pair, "in sync")
        for series in previous.keys() - current.keys():
            gone = previous[series]
            detector.forget(*series)
            self.metrics.forget(flow.name, flow.source, flow.target, gone)
            if series in was_alerting:
                self._recovered(flow, gone, "no longer sampled")
        self._series[flow.name] = current
        self._alerting[flow.name] = [
            _alert_fields(flow, current[series], alert)
            for series, alert in detector.alerting().items()
            if series in current
        ]

    def alerts(self) -> list[dict[str, Any]]:
        """Every series in sync delay now, with the numbers that raised it."""
        return [alert for flow in self.flows for alert in self._alerting[flow.name]]

    def _raised(self, flow: FlowConfig, pair: OffsetPair, alert: Alert) -> None:
        self.metrics.alerts_total.labels(flow.name, pair.kind.value).inc()
        self._log(
            f"sync delay: {_describe(flow, pair)} a_sub={alert.a_sub} b_sub={alert.b_sub} "
            f"threshold={alert.threshold} a={pair.a} b={pair.b}"
        )
        self._notify(
            "alert",
            flow,
            pair,
            a_sub=alert.a_sub,
            b_sub=alert.b_sub,
            threshold=alert.threshold,
        )

    def _recovered(self, flow: FlowConfig, pair: OffsetPair, reason: str) -> None:
        self._log(f"sync delay over ({reason}): {_describe(flow, pair)} a={pair.a} b={pair.b}")
        self._notify("recovery", flow, pair, reason=reason)

    def _notify(self, event: str, flow: FlowConfig, pair: OffsetPair, **numbers: Any) -> None:
        if self._webhook is None:
            return
        self._webhook.send(
            {
                "event": event,
                **_series_fields(flow, pair),
                **numbers,
                "time": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """Sample every flow every PT seconds until `request_stop`."""
        self._running = True
        self._beat = time.monotonic()
        try:
            due = {f.name: time.monotonic() for f in self.flows}
            while not self._stop.is_set():
                for flow in self.flows:
                    if self._stop.is_set():
                        break
                    if time.monotonic() >= due[flow.name]:
                        self.tick(flow)
                        # Fixed rate keeps samples PT apart; after an overrun, sample at once.
                        due[flow.name] = max(due[flow.name] + period_of(flow), time.monotonic())
                self._beat = time.monotonic()
                self._stop.wait(min(1.0, max(0.0, min(due.values()) - time.monotonic())))
        finally:
            self._running = False

    def request_stop(self) -> None:
        self._stop.set()

    def health(self) -> tuple[bool, str]:
        if not self._running:
            return False, "sampling loop not running"
        age = time.monotonic() - self._beat
        if age > self._stale_after:
            return False, f"sampling loop stuck for {age:.0f}s"
        return True, "ok"

    def close(self) -> None:
        self.sampler.close()


# --- entry points for the CLI -----------------------------------------------------------------


def sample_once(
    config: FerryConfig, sampler: Sampler | None = None
) -> list[tuple[FlowConfig, FlowSample | FerryError]]:
    """One sample of every enabled flow (or why there is none): a connectivity check."""
    if not config.enabled_flows:
        raise FerryError(f"{config.path or 'the config'} enables no flow to monitor")
    sampler = sampler or KafkaSampler(config)
    results: list[tuple[FlowConfig, FlowSample | FerryError]] = []
    try:
        for flow in config.enabled_flows:
            try:
                results.append((flow, sampler.sample(flow)))
            except KafkaUnavailableError as exc:
                results.append((flow, exc))
    finally:
        sampler.close()
    return results


def serve(
    config: FerryConfig,
    *,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    webhook_url: str | None = None,
    log: Log = stderr_log,
    on_ready: Callable[[int], None] = lambda _port: None,
) -> None:
    """Run the monitor and its HTTP server until SIGINT/SIGTERM; `on_ready(port)` once up."""
    webhook = Webhook(webhook_url, log) if webhook_url else None
    try:
        service = MonitorService(config, log=log, webhook=webhook)
        audit = AuditLoop(config, AuditMetrics(service.metrics.registry), log, webhook)
        try:
            server = MetricsServer(service.metrics.registry, service.health, port, host)
        except OSError as exc:
            raise FerryError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; pick another "
                "port with --metrics-port (0 = any free port) or another --metrics-host"
            ) from None

        def stop() -> None:
            log("stopping")
            service.request_stop()

        try:
            with stop_on_signals(stop):
                server.start()
                on_ready(server.port)
                for flow in service.flows:
                    groups = (
                        f"; consume offsets of groups {list(flow.groups)}"
                        if flow.sync_group_offsets_enabled
                        else ""
                    )
                    log(
                        f"monitoring flow {flow.name} every {period_of(flow)}s: "
                        f"latest offsets{groups}"
                    )
                for flow in audit.flows:
                    log(
                        f"auditing flow {flow.name} every {flow.audit_interval_seconds}s: "
                        "records in closed buckets of that width"
                    )
                if audit.flows:
                    audit.start()
                service.run()
        finally:
            audit.close()
            server.stop()
            service.close()
    finally:
        if webhook is not None:
            webhook.close()
