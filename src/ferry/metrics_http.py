"""One small HTTP server for Prometheus: `/metrics` and `/healthz`, on loopback by default.

`ferry run --metrics-port` and `ferry monitor --metrics-port` both serve through this, so
both answer the same two paths the same way. `/healthz` is 200 only while the caller's
`healthy()` says so (its loop is alive), which is what a liveness probe needs: a process can
be up and its work stalled (seed 001).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

__all__ = ["MetricsServer"]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape would drown ferry's own messages


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        port: int,
        host: str = "127.0.0.1",
        healthy: Callable[[], bool] = lambda: True,
    ) -> None:
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                ok = healthy()
                start_response(
                    "200 OK" if ok else "503 Service Unavailable",
                    [("Content-Type", "text/plain")],
                )
                return [b"ok\n" if ok else b"stalled\n"]
            return metrics(environ, start_response)  # type: ignore[no-any-return]

        self._server: WSGIServer = make_server(host, port, app, handler_class=_Quiet)
        self.port = int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
