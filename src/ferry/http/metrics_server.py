"""One small HTTP server for Prometheus: `/metrics` and `/healthz`, on 127.0.0.1 by default.

`ferry run --metrics-port` and `ferry monitor --metrics-port` both serve through this. It has
no authentication, so reaching it from elsewhere is a choice the operator makes with a proxy,
not a default. `/healthz` answers 200 only while the caller's `health()` says its loop is alive
(503 and why otherwise): a process can be up and its work stalled.

`/metrics` is prometheus-client's own WSGI app (`make_wsgi_app`): the text format, or
OpenMetrics and gzip when the scraper asks for them (its Accept and Accept-Encoding headers),
and `?name[]=...` to scrape some families only. The server is prometheus-client's
`ThreadingWSGIServer` (wsgiref, a thread per request); ferry adds only the routing of its two
paths and `/healthz`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["Health", "MetricsServer"]

Health = Callable[[], tuple[bool, str]]
# WSGI's start_response and app (PEP 3333), as wsgiref calls them.
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class MetricsServer:
    """`/metrics` (Prometheus text format of `registry`) and `/healthz`."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Health,
        port: int,
        host: str = "127.0.0.1",
    ) -> None:
        app = _routes(make_wsgi_app(registry), health)
        self._server = make_server(
            host, port, app, server_class=ThreadingWSGIServer, handler_class=_QuietHandler
        )
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


def _routes(metrics: WsgiApp, health: Health) -> WsgiApp:
    """`/metrics` to prometheus-client's app, `/healthz` to `health()`, 404 elsewhere (the
    metrics app alone would answer the metrics on every path)."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/healthz":
            ok, why = health()
            status = "200 OK" if ok else "503 Service Unavailable"
            return _reply(start_response, status, f"{why}\n", "text/plain; charset=utf-8")
        return _reply(
            start_response, "404 Not Found", "not found: try /metrics or /healthz\n", "text/plain"
        )

    return app


def _reply(start_response: StartResponse, status: str, text: str, content_type: str) -> list[bytes]:
    body = text.encode()
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown ferry's own messages on stderr
