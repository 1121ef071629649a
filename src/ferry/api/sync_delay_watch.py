"""The sync-delay rule inside `ferry run`, for the console: `ferry monitor`'s loop in a thread.

An operator looking at the console wants the monitor's alerts beside the lag. `ferry run`
with its API therefore runs the same `MonitorService` (`monitor/service.py`: the same
samples, detectors and thresholds as `ferry monitor`) on a daemon thread: its alerts and
recoveries are ferry run's console lines (the events list), and the series in sync delay now
are `GET /api/v1/alerts`. Its metrics stay in its own registry: `ferry monitor` is still what
Prometheus scrapes and what posts to a webhook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ferry.config.model import FerryConfig
from ferry.monitor.service import MonitorService

__all__ = ["SyncDelayWatch"]


class SyncDelayWatch:
    def __init__(self, config: FerryConfig, log: Callable[[str], None]) -> None:
        self._service = MonitorService(config, log=log)
        self._thread = threading.Thread(
            target=self._service.run, name="ferry-sync-delay", daemon=True
        )

    def start(self) -> SyncDelayWatch:
        self._thread.start()
        return self

    def alerts(self) -> list[dict[str, Any]]:
        return self._service.alerts()

    def stop(self) -> None:
        self._service.request_stop()
        self._thread.join(10)
        self._service.close()
