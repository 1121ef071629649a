"""Which clusters answer, so the console speaks of a cluster once per change, not per attempt.

No I/O (but `kafka.log.reachable`'s log line). While a cluster stays away ferry retries it,
every second at first; saying so at every attempt (or letting librdkafka print every refused
connection) buries the state that matters: cluster A stopped answering at 10:02, and
answered again at 10:07.
"""

from __future__ import annotations

import threading

from ferry.errors import KafkaUnavailableError
from ferry.kafka.log import reachable

__all__ = ["Reachability"]


class Reachability:
    """Each method returns the line to show, or None when nothing changed."""

    def __init__(self) -> None:
        self._down: set[str] = set()
        self._lock = threading.Lock()  # the runner and the control plane share one

    def failed(self, error: KafkaUnavailableError, what: str = "") -> str | None:
        """`error` says `error.cluster` did not answer; `what` names who noticed (a flow)."""
        with self._lock:
            if error.cluster in self._down:
                return None
            self._down.add(error.cluster)
        prefix = f"{what}: " if what else ""
        return f"{prefix}{error}; retrying until it answers"

    def answered(self, cluster: str) -> str | None:
        reachable(cluster)  # the log's line, if librdkafka's lines said it was unreachable
        with self._lock:
            if cluster not in self._down:
                return None
            self._down.discard(cluster)
        return f"cluster {cluster} answers again"

    def answered_all(self) -> list[str]:
        """Every cluster that was away answers again (the action that needed them all worked)."""
        with self._lock:
            down, self._down = sorted(self._down), set()
        for cluster in down:
            reachable(cluster)
        return [f"cluster {cluster} answers again" for cluster in down]

    def is_down(self, cluster: str) -> bool:
        return cluster in self._down
