"""POSTing alert and recovery events to a webhook, off the sampling thread.

A slow or broken receiver must never delay or stop sampling: events go through a bounded
queue to one worker thread, failures are logged and dropped, and a full queue drops the
newest event (with a log line) rather than block.
"""

from __future__ import annotations

import json
import queue
import ssl
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import httpx

from ferry.errors import ConfigError

__all__ = ["Webhook"]


class Webhook:
    def __init__(
        self,
        url: str,
        log: Callable[[str], None],
        *,
        timeout: float = 5.0,
        max_pending: int = 1000,
    ) -> None:
        if urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
            raise ConfigError(f"--webhook '{url}' is not an http(s) URL")
        self.url = url
        self._log = log
        self._timeout = timeout
        self._pending: queue.Queue[dict[str, Any] | None] = queue.Queue(max_pending)
        self._thread = threading.Thread(target=self._work, name="ferry-webhook", daemon=True)
        self._thread.start()

    def send(self, event: dict[str, Any]) -> None:
        try:
            self._pending.put_nowait(event)
        except queue.Full:
            self._log(f"webhook: {self._pending.maxsize} events pending; dropped one: {event}")

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued, waiting at most `timeout` seconds."""
        try:
            self._pending.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _work(self) -> None:
        # The system's certificate authorities (as Python's own ssl module trusts), not
        # certifi's: a receiver inside a company is signed by the company's CA.
        tls = ssl.create_default_context()
        with httpx.Client(timeout=self._timeout, verify=tls) as client:
            while (event := self._pending.get()) is not None:
                self._post(client, event)

    def _post(self, client: httpx.Client, event: dict[str, Any]) -> None:
        try:
            response = client.post(
                self.url,
                content=json.dumps(event).encode(),
                headers={"Content-Type": "application/json"},
            )
            if not response.is_success:
                reason = f"HTTP {response.status_code} {response.reason_phrase}"
                self._log(f"webhook: POST {self.url} failed: {reason}")
        except Exception as exc:  # any failure of the receiver is its problem, not ours
            self._log(f"webhook: POST {self.url} failed: {exc}")
