"""One small HTTP server for Prometheus: `/metrics` and `/healthz`, on 127.0.0.1 by default.

`ferry run --metrics-port` and `ferry monitor --metrics-port` both serve through this. It has
no authentication, so reaching it from elsewhere is a choice the operator makes with a proxy,
not a default. `/healthz` answers 200 only while the caller's `health()` says its loop is alive
(503 and why otherwise): a process can be up and its work stalled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Health", "MetricsServer"]

Health = Callable[[], tuple[bool, str]]


class MetricsServer:
    """`/metrics` (Prometheus text format of `registry`) and `/healthz`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        port: int,
        host: str = "127.0.0.1",
    ) -> None:
        self._server = ThreadingHTTPServer((host, port), _handler(registry, health))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="ferry-metrics-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()


def _handler(registry: CollectorRegistry, health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                ok, why = health()
                self._reply(200 if ok else 503, f"{why}\n".encode(), "text/plain; charset=utf-8")
            else:
                self._reply(404, b"not found: try /metrics or /healthz\n", "text/plain")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes every few seconds would drown ferry's own messages on stderr

    return Handler
