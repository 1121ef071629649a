"""A read-only source (`A->B.source.read.only = true`): ferry writes nothing to A. Which
settings would, as the loader refuses them (pure: entries in, the offending entry and the
sentence out).

ferry writes to a flow's source only its heartbeats; its offset syncs (offset runs),
checkpoints, position and control records live on the target. So heartbeats are off unless a
key turns them on (refused), as is MM2's `offset-syncs.topic.location = source`, another
enabled flow copying into A, and the API's changes kept on A (`api.control.cluster`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferry.config.entries import Entry
from ferry.config.model import FlowConfig

__all__ = ["conflict", "source_settings"]

Refusal = tuple[Entry, str]


def source_settings(
    source: str,
    target: str,
    settings: Mapping[str, Entry],
    entries: Mapping[str, Entry],
    fields: dict[str, Any],
) -> Refusal | None:
    """A read-only flow's own settings: heartbeats turned off in `fields` (the FlowConfig
    fields being built) unless a key turns them on, which is refused, as is a request for
    offset syncs on the source."""
    why = f"{source}->{target}.source.read.only = true keeps {source} unwritten"
    heartbeats = settings.get("emit.heartbeats.enabled")
    if heartbeats is not None and fields["emit_heartbeats_enabled"]:
        return heartbeats, f"writes heartbeats to {source}, and {why}: set it to false or remove it"
    fields["emit_heartbeats_enabled"] = False
    for key in (f"{source}->{target}.offset-syncs.topic.location", "offset-syncs.topic.location"):
        location = entries.get(key)
        if location is not None:  # the flow's own key wins over the default
            if location.value.strip().lower() == "source":
                return location, (
                    f"asks for offset syncs on {source}, and {why}: set it to target (where "
                    "ferry keeps them) or remove it"
                )
            break
    return None


def conflict(
    flows: tuple[FlowConfig, ...],
    entries: Mapping[str, Entry],
    per_flow: Mapping[tuple[str, str], Mapping[str, Entry]],
    defaults: Mapping[str, Entry],
) -> Refusal | None:
    """A read-only source holds for the whole config: no enabled flow copies into it and the
    control topic is not kept there (either would write to it)."""
    for flow in flows:
        if not (flow.enabled and flow.source_read_only):
            continue
        own = per_flow.get((flow.source, flow.target), {})
        said = own.get("source.read.only") or defaults["source.read.only"]
        why = f"{said.key} = true (line {said.line}) keeps {flow.source} unwritten"
        for other in flows:
            if other.enabled and other.target == flow.source:
                entry = per_flow[(other.source, other.target)]["enabled"]
                message = (
                    f"flow {other.name} would write its copies to {flow.source}, and {why}: "
                    "turn one of them off"
                )
                return entry, message
        control = entries.get("api.control.cluster")
        if control is not None and control.value == flow.source:
            return control, (
                f"keeps the API's changes on {flow.source}, and {why}: name another cluster"
            )
    return None
