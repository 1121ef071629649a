"""A flow's runtime override: topics added or removed over the API, pause, and whether it runs.

Pure code. The config file's `topics`/`topics.exclude` stay the starting point; the override
only names exceptions to them, so a file change still acts on every topic the API never
touched. The last word on a topic wins: adding it undoes an earlier removal and the other way
round. `enabled` (None: as the file says) turns a flow on or off whatever the file's
`A->B.enabled` says: `ferry switchover` stops A->B and starts B->A that way, in the running
`ferry run`. `lifted` names the remote topics whose protection (a DENY WRITE for everyone but
ferry, `protect.remote.topics`) a failover or switchover lifted, `*` for all of them: a
running `ferry run` stops protecting them, and a switchover back clears it. The record owns
its wire encoding (the value of a control-topic record, and the
`control.json` the planner reads), as MM2's Checkpoint and Heartbeat do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ferry.config.model import FerryConfig

__all__ = ["LIFTED_ALL", "FlowControl", "effective_config"]

LIFTED_ALL = "*"  # no topic has this name: Kafka's topic names are [a-zA-Z0-9._-]


@dataclass(frozen=True)
class FlowControl:
    """What the API said about one flow. The empty value means: exactly what the file says."""

    added: frozenset[str] = field(default_factory=frozenset)
    removed: frozenset[str] = field(default_factory=frozenset)
    paused: bool = False
    enabled: bool | None = None  # None: as the config file says
    # Remote topics no longer protected (LIFTED_ALL: every one), since a failover or switchover.
    lifted: frozenset[str] = field(default_factory=frozenset)

    def add(self, topic: str) -> FlowControl:
        return replace(self, added=self.added | {topic}, removed=self.removed - {topic})

    def remove(self, topic: str) -> FlowControl:
        return replace(self, added=self.added - {topic}, removed=self.removed | {topic})

    def pause(self) -> FlowControl:
        return replace(self, paused=True)

    def resume(self) -> FlowControl:
        return replace(self, paused=False)

    def enable(self, enabled: bool | None) -> FlowControl:
        """Run the flow (True), not (False), or as the file says (None)."""
        return replace(self, enabled=enabled)

    def lift(self, topics: frozenset[str] | None = None) -> FlowControl:
        """Protection lifted on `topics` (remote names), or on every remote topic (None)."""
        if topics is None or LIFTED_ALL in self.lifted:
            return replace(self, lifted=frozenset({LIFTED_ALL}))
        return replace(self, lifted=self.lifted | topics)

    def protect(self) -> FlowControl:
        """Every remote topic protected again (a switchover back to this flow)."""
        return replace(self, lifted=frozenset())

    def protected(self, topic: str) -> bool:
        """Whether remote topic `topic` is still to be protected."""
        return LIFTED_ALL not in self.lifted and topic not in self.lifted

    def runs(self, by_file: bool) -> bool:
        """Whether the flow runs, given whether the file enables it."""
        return by_file if self.enabled is None else self.enabled

    def copying(self, flow: str, by_file: bool) -> str | None:
        """Why flow `flow` copies now (enabled and not paused), as a sentence a refusal
        names; None when it does not (stopped or paused, in the file or the control state)."""
        if not self.runs(by_file) or self.paused:
            return None
        if self.enabled:
            return f"flow {flow} runs: its control record turned it on"
        return (
            f"flow {flow} runs: the config file enables it and its control record neither "
            "stops nor pauses it"
        )

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
        return not (
            self.added or self.removed or self.paused or self.enabled is not None or self.lifted
        )

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "added": sorted(self.added),
            "removed": sorted(self.removed),
            "paused": self.paused,
        }
        if self.enabled is not None:  # records written before it existed stay byte-equal
            data["enabled"] = self.enabled
        if self.lifted:
            data["lifted"] = sorted(self.lifted)
        return data

    def to_bytes(self) -> bytes:
        return json.dumps(self.as_json(), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: Any) -> FlowControl:
        """Raises ValueError on anything that is not a control record."""
        if not isinstance(data, dict):
            raise ValueError(f"a flow control record is a JSON object, not {data!r}")
        added, removed = data.get("added", []), data.get("removed", [])
        paused, enabled = data.get("paused", False), data.get("enabled")
        lifted = data.get("lifted", [])
        if (
            not isinstance(lifted, list)
            or not all(isinstance(t, str) for t in [*added, *removed, *lifted])
            or not isinstance(paused, bool)
            or not isinstance(enabled, bool | None)
        ):
            raise ValueError(f"not a flow control record: {data!r}")
        return cls(frozenset(added), frozenset(removed), paused, enabled, frozenset(lifted))

    @classmethod
    def from_bytes(cls, data: bytes | None) -> FlowControl:
        if not data:
            return cls()
        try:
            return cls.from_json(json.loads(data))
        except json.JSONDecodeError as exc:
            raise ValueError(f"a flow control record is not JSON: {exc}") from None


def effective_config(config: FerryConfig, controls: Mapping[str, FlowControl]) -> FerryConfig:
    """`config` with each flow enabled as its control record says (the file where it says
    nothing): the flows `ferry run` runs."""
    flows = tuple(
        flow.model_copy(update={"enabled": controls[flow.name].runs(flow.enabled)})
        if flow.name in controls and controls[flow.name].enabled is not None
        else flow
        for flow in config.flows
    )
    return config if flows == config.flows else config.model_copy(update={"flows": flows})
