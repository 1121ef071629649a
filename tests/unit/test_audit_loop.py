"""`ferry monitor`'s continuous audit loop on scripted rounds (no Spark, no broker)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from ferry.audit.model import TopicResult
from ferry.config import FerryConfig
from ferry.config.model import ClusterConfig, FlowConfig
from ferry.errors import KafkaUnavailableError
from ferry.monitor.audit_loop import AuditLoop
from ferry.monitor.audit_metrics import AuditMetrics


def _config(interval: int | None = 60) -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"},
        flows=(
            FlowConfig(source="A", target="B", enabled=True, audit_interval_seconds=interval),
            FlowConfig(source="B", target="A", enabled=True),
        ),
    )


class _Webhook:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def send(self, event: dict[str, Any]) -> None:
        self.events.append(event)


class _Rounds:
    """Each round's results in turn; what each round was asked."""

    def __init__(self, *rounds: list[TopicResult] | Exception) -> None:
        self.rounds = list(rounds)
        self.asked: list[tuple[Any, str, int, int]] = []
        self.sessions = 0

    def session(self, _config: FerryConfig) -> Any:
        self.sessions += 1
        return f"spark-{self.sessions}"

    def audit(
        self, spark: Any, _c: FerryConfig, flow: FlowConfig, bucket_ms: int, until_ms: int
    ) -> list[TopicResult]:
        self.asked.append((spark, flow.name, bucket_ms, until_ms))
        result = self.rounds.pop(0)
        if isinstance(result, Exception):
            raise result
        return result


def _loop(rounds: _Rounds, now: float = 1_000_030.5) -> tuple[AuditLoop, CollectorRegistry, Any]:
    registry, webhook, lines = CollectorRegistry(), _Webhook(), []
    loop = AuditLoop(
        _config(),
        AuditMetrics(registry),
        lines.append,
        webhook,  # type: ignore[arg-type]
        session=rounds.session,
        audit=rounds.audit,
        clock=lambda: now,
    )
    return loop, registry, (webhook, lines)


def _gauge(registry: CollectorRegistry, name: str, topic: str) -> float | None:
    return registry.get_sample_value(name, {"flow": "A->B", "topic": topic})


def _topic(missing: int = 0, duplicated: int = 0, in_flight: int = 0) -> TopicResult:
    ranges = [{"partition": 0, "first": 0, "last": missing - 1, "count": missing}]
    return TopicResult(
        "orders",
        "A.orders",
        source=100,
        missing=missing,
        duplicated=duplicated,
        in_flight=in_flight,
        missing_ranges=ranges if missing else [],
    )


def test_only_flows_with_an_interval_are_audited_and_up_to_the_open_bucket() -> None:
    rounds = _Rounds([_topic()])
    loop, registry, _ = _loop(rounds)
    assert [f.name for f in loop.flows] == ["A->B"]
    loop.round(loop.flows[0])
    # now 1,000,030.5 s: the open 60 s bucket began at 1,000,020 s
    assert rounds.asked == [("spark-1", "A->B", 60_000, 1_000_020_000)]
    assert _gauge(registry, "ferry_audit_missing_records", "orders") == 0
    labels = {"flow": "A->B"}
    assert registry.get_sample_value("ferry_audit_rounds_total", labels) == 1
    assert registry.get_sample_value("ferry_audit_interval_seconds", labels) == 60


class _Spark:
    """What the loop calls on a session: cancelAllJobs (on close) and stop."""

    def __init__(self) -> None:
        self.stopped = 0
        self.sparkContext = self

    def cancelAllJobs(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped += 1


def test_one_spark_session_serves_every_round_and_is_stopped_on_close() -> None:
    spark = _Spark()
    rounds = _Rounds([_topic()], [_topic()], [_topic()])
    loop, _, _ = _loop(rounds)
    loop._session = lambda _c: (rounds.session(_c), spark)[1]
    for _ in range(3):
        loop.round(loop.flows[0])
    assert rounds.sessions == 1
    assert [asked[0] for asked in rounds.asked] == [spark] * 3
    loop.close()
    assert spark.stopped == 1


def test_a_loss_sets_the_gauges_alerts_once_and_recovers() -> None:
    rounds = _Rounds(
        [_topic(in_flight=5)],
        [_topic(missing=10, duplicated=2)],
        [_topic(missing=10, duplicated=2)],
        [_topic()],
    )
    loop, registry, (webhook, lines) = _loop(rounds)
    flow = loop.flows[0]
    loop.round(flow)
    assert _gauge(registry, "ferry_audit_in_flight_records", "orders") == 5
    assert _gauge(registry, "ferry_audit_missing_records", "orders") == 0  # in flight: not lost
    assert webhook.events == []
    loop.round(flow)
    loop.round(flow)
    assert _gauge(registry, "ferry_audit_missing_records", "orders") == 10
    assert _gauge(registry, "ferry_audit_duplicated_records", "orders") == 2
    assert registry.get_sample_value("ferry_audit_alerts_total", {"flow": "A->B"}) == 1
    [alert] = webhook.events
    assert alert["event"] == "alert" and alert["kind"] == "audit"
    assert (alert["flow"], alert["topic"], alert["remote_topic"]) == ("A->B", "orders", "A.orders")
    assert (alert["missing"], alert["duplicated"]) == (10, 2)
    assert alert["missing_ranges"] == [{"partition": 0, "first": 0, "last": 9, "count": 10}]
    assert any("missing=10" in line and "partition:offsets 0:0-9" in line for line in lines)
    loop.round(flow)
    assert _gauge(registry, "ferry_audit_missing_records", "orders") == 0
    assert webhook.events[-1]["event"] == "recovery"
    assert webhook.events[-1]["reason"] == "none missing"


def test_a_failed_round_is_logged_once_and_counted_and_the_next_one_runs() -> None:
    down = KafkaUnavailableError("B", "127.0.0.1:2", "timed out")
    rounds = _Rounds(down, down, [_topic(missing=1)])
    loop, registry, (_, lines) = _loop(rounds)
    for _ in range(3):
        loop.round(loop.flows[0])
    assert registry.get_sample_value("ferry_audit_round_failures_total", {"flow": "A->B"}) == 2
    assert sum("no audit this round" in line for line in lines) == 1
    assert "auditing again" in lines[-2]
    assert _gauge(registry, "ferry_audit_missing_records", "orders") == 1
