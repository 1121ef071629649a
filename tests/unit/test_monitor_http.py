"""`ferry monitor`'s HTTP side: /metrics and /healthz on 127.0.0.1, and webhook POSTs."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import ConfigError, FerryError
from ferry.http.metrics_server import MetricsServer
from ferry.monitor.metrics import MonitorMetrics
from ferry.monitor.sampler import FlowSample, OffsetPair
from ferry.monitor.service import MonitorService, serve
from ferry.monitor.sync_delay import DelayKind
from ferry.monitor.webhook import Webhook


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def served() -> Iterator[tuple[MonitorMetrics, list[tuple[bool, str]], str]]:
    metrics = MonitorMetrics()
    health = [(True, "ok")]
    server = MetricsServer(metrics.registry, lambda: health[0], port=0)
    server.start()
    try:
        yield metrics, health, f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()


def test_metrics_are_served_in_prometheus_text_format(
    served: tuple[MonitorMetrics, list[tuple[bool, str]], str],
) -> None:
    metrics, _health, base = served
    metrics.register_flow("A->B", "A", "B", 60)
    pair = OffsetPair(DelayKind.LATEST, None, "orders", "A.orders", 3, 10_000, 5_000)
    metrics.record("A->B", "A", "B", pair, alerting=True)

    status, content_type, body = _get(f"{base}/metrics")

    assert status == 200 and content_type.startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    alert = (("flow", "A->B"), ("group", ""), ("kind", "latest"), ("partition", "3"))
    assert samples[("ferry_sync_delay_alert", (*alert, ("topic", "orders")))] == 1
    on_b = (("cluster", "B"), ("flow", "A->B"), ("partition", "3"), ("topic", "orders"))
    assert samples[("ferry_monitor_offset", on_b)] == 5_000
    for kind in ("latest", "consume"):
        key = ("ferry_sync_delay_alerts_total", (("flow", "A->B"), ("kind", kind)))
        assert samples[key] == 0, "counters exist before the first alert"


def test_healthz_says_ok_while_the_loop_is_alive_and_why_not_otherwise(
    served: tuple[MonitorMetrics, list[tuple[bool, str]], str],
) -> None:
    _metrics, health, base = served
    assert _get(f"{base}/healthz") == (200, "text/plain; charset=utf-8", "ok\n")
    health[0] = (False, "sampling loop stuck for 95s")
    assert _get(f"{base}/healthz")[::2] == (503, "sampling loop stuck for 95s\n")
    assert _get(f"{base}/other")[0] == 404


def test_metrics_come_gzipped_or_filtered_when_the_scraper_asks(
    served: tuple[MonitorMetrics, list[tuple[bool, str]], str],
) -> None:
    metrics, _health, base = served
    metrics.register_flow("A->B", "A", "B", 60)
    plain = _get(f"{base}/metrics")[2]
    request = urllib.request.Request(f"{base}/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(response.read()).decode() == plain
    status, _type, some = _get(f"{base}/metrics?name[]=ferry_sync_delay_alerts_total")
    families = {f.name for f in text_string_to_metric_families(some)}
    assert status == 200 and families == {"ferry_sync_delay_alerts"}
    assert _get(f"{base}/")[0] == 404  # not the metrics on every path
    assert _get(f"{base}/healthz?verbose=1")[::2] == (200, "ok\n")


def test_the_server_listens_on_loopback_only() -> None:
    server = MetricsServer(MonitorMetrics().registry, lambda: (True, "ok"), port=0)
    anywhere = MetricsServer(MonitorMetrics().registry, lambda: (True, "ok"), 0, "0.0.0.0")
    try:
        host, _port = server._server.server_address[:2]
        assert host == "127.0.0.1"
        assert anywhere._server.server_address[0] == "0.0.0.0"  # --metrics-host 0.0.0.0
    finally:
        server.stop()
        anywhere.stop()


def _config() -> FerryConfig:
    return FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"},
        flows=(FlowConfig(source="A", target="B", enabled=True),),
    )


def test_a_busy_port_is_one_clear_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(FerryError, match=f"127.0.0.1:{port}.*--metrics-port"):
            serve(_config(), port=port, log=lambda _line: None)


# --- webhook ----------------------------------------------------------------------------------


class _Receiver:
    """A local HTTP endpoint that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.arrived = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()
                receiver.arrived.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_alerts_and_recoveries_are_posted_as_json() -> None:
    receiver = _Receiver()
    lines: list[str] = []
    webhook = Webhook(receiver.url, lines.append)
    steps = [(i * 100, 0) for i in range(4)] + [(400, 1_000)]
    samples = iter(steps)

    class Sampler:
        def sample(self, flow: FlowConfig) -> FlowSample:
            a, b = next(samples)
            pair = OffsetPair(DelayKind.LATEST, None, "orders", "A.orders", 0, a, b)
            return FlowSample(flow.name, (pair,))

        def close(self) -> None:
            pass

    config = _config()
    service = MonitorService(config, sampler=Sampler(), log=lines.append, webhook=webhook)
    try:
        for _ in steps:
            service.tick(config.flow("A", "B"))
        webhook.close()
    finally:
        receiver.close()

    assert [b["event"] for b in receiver.bodies] == ["alert", "recovery"]
    alert, recovery = receiver.bodies
    assert {k: v for k, v in alert.items() if k != "time"} == {
        "event": "alert",
        "flow": "A->B",
        "kind": "latest",
        "group": None,
        "topic": "orders",
        "remote_topic": "A.orders",
        "partition": 0,
        "a_offset": 300,
        "b_offset": 0,
        "a_sub": 100,
        "b_sub": 0,
        "threshold": 0,
    }
    assert recovery["reason"] == "in sync" and recovery["b_offset"] == 1_000
    assert not [line for line in lines if line.startswith("webhook")]


def test_a_failing_webhook_is_logged_and_never_raises() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        lines: list[str] = []
        webhook = Webhook(f"http://127.0.0.1:{port}/hook", lines.append, timeout=2)
        webhook.send({"event": "alert"})
        webhook.close()
    assert len(lines) == 1
    assert lines[0].startswith(f"webhook: POST http://127.0.0.1:{port}/hook failed:")


def test_a_webhook_must_be_an_http_url() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        Webhook("ftp://example.com/x", lambda _line: None)
