"""What `ferry run` said lately (clusters unreachable and back, flows failed, changes made over
the API, records lost to retention), kept for the console: a bounded, thread-safe list. Secrets
are masked as on the terminal."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ferry import secrets

__all__ = ["Events"]


class Events:
    def __init__(self, capacity: int = 200) -> None:
        self._lines: deque[tuple[float, str]] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        with self._lock:
            self._lines.append((time.time(), secrets.redact(line)))

    def recent(self) -> list[dict[str, Any]]:
        """Newest first."""
        with self._lock:
            lines = list(self._lines)
        return [{"t": at, "message": line} for at, line in reversed(lines)]
