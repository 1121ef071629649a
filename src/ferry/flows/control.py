"""A flow's runtime override: topics added or removed over the API, and pause.

Pure code. The config file's `topics`/`topics.exclude` stay the starting point; the override
only names exceptions to them, so a file change still acts on every topic the API never
touched. The last word on a topic wins: adding it undoes an earlier removal and the other way
round. The record owns its wire encoding (the value of a control-topic record, and the
`control.json` the planner reads), as MM2's Checkpoint and Heartbeat do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["FlowControl"]


@dataclass(frozen=True)
class FlowControl:
    """What the API said about one flow. The empty value means: exactly what the file says."""

    added: frozenset[str] = field(default_factory=frozenset)
    removed: frozenset[str] = field(default_factory=frozenset)
    paused: bool = False

    def add(self, topic: str) -> FlowControl:
        return replace(self, added=self.added | {topic}, removed=self.removed - {topic})

    def remove(self, topic: str) -> FlowControl:
        return replace(self, added=self.added - {topic}, removed=self.removed | {topic})

    def pause(self) -> FlowControl:
        return replace(self, paused=True)

    def resume(self) -> FlowControl:
        return replace(self, paused=False)

    def listed(self, topic: str, by_file: bool) -> bool:
        """Whether the flow's lists take `topic`, given whether the file's regexes do. The
        naming rules (internal topics, cycles, heartbeats) apply after this, unchanged."""
        if topic in self.added:
            return True
        if topic in self.removed:
            return False
        return by_file

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.paused)

    def as_json(self) -> dict[str, Any]:
        return {"added": sorted(self.added), "removed": sorted(self.removed), "paused": self.paused}

    def to_bytes(self) -> bytes:
        return json.dumps(self.as_json(), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: Any) -> FlowControl:
        """Raises ValueError on anything that is not a control record."""
        if not isinstance(data, dict):
            raise ValueError(f"a flow control record is a JSON object, not {data!r}")
        added, removed = data.get("added", []), data.get("removed", [])
        paused = data.get("paused", False)
        if not all(isinstance(t, str) for t in [*added, *removed]) or not isinstance(paused, bool):
            raise ValueError(f"not a flow control record: {data!r}")
        return cls(frozenset(added), frozenset(removed), paused)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> FlowControl:
        if not data:
            return cls()
        try:
            return cls.from_json(json.loads(data))
        except json.JSONDecodeError as exc:
            raise ValueError(f"a flow control record is not JSON: {exc}") from None
