"""The webhook's client: a receiver that answers with an HTTP error is logged, naming the URL."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from ferry.monitor.webhook import Webhook


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(503, "Busy")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_http_error_answer_is_logged_with_its_status_and_never_raises() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    lines: list[str] = []
    try:
        webhook = Webhook(url, lines.append, timeout=5)
        webhook.send({"event": "alert"})
        webhook.close()
    finally:
        server.shutdown()
        server.server_close()
    assert lines == [f"webhook: POST {url} failed: HTTP 503 Busy"]
