"""Fills the console's history: every few seconds, each flow's counters as its state dir says.

A daemon thread beside the API; reading a flow's stats costs a few small JSON files, so a
sample every 5 s (720 an hour per flow) is cheap. The first sample is taken at start, so the
charts have a point as soon as the page opens.
"""

from __future__ import annotations

import threading
import time

from ferry.api.history import History, Sample
from ferry.api.views import latency_totals
from ferry.engine.flow_state import FlowState

__all__ = ["Sampler"]


class Sampler:
    def __init__(self, states: dict[str, FlowState], history: History) -> None:
        self._states = states
        self.history = history
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="ferry-console-history", daemon=True
        )

    def sample(self) -> None:
        now = time.time()
        for name, state in self._states.items():
            stats = state.stats()
            latency = latency_totals(stats)
            self.history.add(
                name,
                Sample(
                    at=now,
                    lag=state.lag(stats),
                    records=int(stats.get("records", 0)),
                    bytes=int(stats.get("bytes", 0)),
                    latency_sum_ms=latency.total,
                    latency_count=latency.count,
                ),
            )

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.history.interval_seconds):
                return

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
