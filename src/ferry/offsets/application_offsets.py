"""Offsets an application keeps in its own store, translated exactly to another cluster.

An exactly-once sink that stores its input offsets beside its output (in its own database)
fails over by translating those offsets itself: each (topic, partition, offset) on the
cluster it leaves becomes a (remote topic, partition, offset) on the cluster it moves to.

A stored offset means "the next record to read". Its translation is the offset of the copy
of the first record at or after it that was replicated (`ferry.offsets.index`): a position
in a gap (compaction, a transaction marker, an aborted record) lands on the copy of the next
record. Over more than one flow (a chain A->B->C, two aggregates) the hops of
`ferry.offsets.routes` are composed, each exact, so the composition is too.

Unlike a group's failover, an offset past what has been replicated is refused rather than
clamped to the replicated end: the application would otherwise skip nothing now but read
records twice later, and an exactly-once sink wants to know. Parsing, composing and the
messages are pure; `translate_stored` reads each flow's runs from its target.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ferry.config.model import FerryConfig, FlowConfig
from ferry.errors import ConfigError
from ferry.flows.override import FlowControl
from ferry.offsets.index import Match, OffsetIndex
from ferry.offsets.routes import RouteHop, routes
from ferry.offsets.runs_and_checkpoints import FlowRunsStores

__all__ = [
    "Leg",
    "StoredOffset",
    "Translated",
    "Untranslatable",
    "carry",
    "parse_line",
    "parse_lines",
    "translate_stored",
]


@dataclass(frozen=True)
class StoredOffset:
    """A position an application stored: the next record to read in `topic`'s `partition`."""

    topic: str
    partition: int
    offset: int

    def as_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "offset": self.offset}


@dataclass(frozen=True)
class Translated:
    """Where the application resumes on the other cluster: the next record to read there."""

    topic: str
    partition: int
    offset: int
    remote_topic: str
    remote_partition: int
    remote_offset: int
    via: str  # the flows whose runs were read, in order ("A->B" or "A->B, B->C")
    match: str  # "exact", "gap" or "end" (see ferry.offsets.index.Match)

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "remote_topic": self.remote_topic,
            "remote_partition": self.remote_partition,
            "remote_offset": self.remote_offset,
        }


@dataclass(frozen=True)
class Untranslatable:
    """A position that cannot be translated: its fields as given and why."""

    fields: dict[str, Any]
    error: str
    line: int | None = None  # the input line it was read from, when read from lines

    def as_json(self) -> dict[str, Any]:
        return {**self.fields, "error": self.error}


_FIELDS = (("topic", str), ("partition", int), ("offset", int))


def parse_line(number: int, text: str) -> StoredOffset | Untranslatable:
    """One JSON line `{"topic": ..., "partition": ..., "offset": ...}` (other fields ignored)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return Untranslatable({"input": text}, f"line {number}: not JSON ({exc})", number)
    if not isinstance(value, dict):
        return Untranslatable(
            {"input": value},
            f"line {number}: not a JSON object with topic, partition, offset",
            number,
        )
    for name, kind in _FIELDS:
        if name not in value:
            return Untranslatable(value, f'line {number}: no field "{name}"', number)
        given = value[name]
        if not isinstance(given, kind) or isinstance(given, bool):
            what = "a string" if kind is str else "an integer"
            return Untranslatable(
                value, f'line {number}: field "{name}" must be {what}, not {given!r}', number
            )
        if isinstance(given, int) and given < 0:
            return Untranslatable(
                value, f'line {number}: field "{name}" must not be negative ({given})', number
            )
    if not value["topic"]:
        return Untranslatable(value, f'line {number}: field "topic" is empty', number)
    return StoredOffset(value["topic"], value["partition"], value["offset"])


def parse_lines(lines: Iterable[str]) -> list[StoredOffset | Untranslatable]:
    """Each non-blank line parsed, numbered from 1 as the input counts them."""
    return [parse_line(n, line) for n, line in enumerate(lines, 1) if line.strip()]


class Runs(Protocol):
    """What translation reads of a flow's runs (a `RunsStore`)."""

    def has(self, topic: str, partition: int) -> bool: ...

    def index(self, topic: str, partition: int) -> OffsetIndex: ...


@dataclass(frozen=True)
class Leg:
    """One hop of a route with the runs it reads for one partition (None: no run at all)."""

    flow: str
    here: str  # the cluster the position is on
    topic: str  # the topic it is in there
    index: OffsetIndex | None
    inverse: bool = False  # read the runs backwards (a remote topic back to its source)
    needs_runs: bool = field(default=False)  # without runs the records did not go this way


def carry(offset: int, partition: int, legs: Sequence[Leg]) -> tuple[int, Match] | str:
    """`offset` carried through each leg in turn; a reason instead when it cannot be."""
    worst = Match.EXACT
    for leg in legs:
        where = f"{leg.topic} partition {partition} on {leg.here}"
        if leg.index is None or not len(leg.index):
            return f"nothing of {where} has been replicated by flow {leg.flow} yet"
        t = leg.index.upstream(offset) if leg.inverse else leg.index.downstream(offset)
        if t.match is Match.END and t.beyond:
            end = offset - t.beyond  # one past the last replicated offset on this side
            return (
                f"offset {offset} of {where} is beyond what flow {leg.flow} has replicated "
                f"(replicated position {end}); run ferry until it has caught up"
            )
        offset = t.offset
        if t.match is not Match.EXACT and worst is Match.EXACT:
            worst = t.match
    return offset, worst


def _legs(
    route: Sequence[RouteHop], partition: int, runs: Callable[[FlowConfig], Runs]
) -> list[Leg]:
    legs = []
    for hop in route:
        store = runs(hop.flow)
        index = (
            store.index(hop.source_topic, partition)
            if store.has(hop.source_topic, partition)
            else None
        )
        needs = hop.direction == "inverse" or not hop.flow.enabled
        legs.append(
            Leg(hop.flow.name, hop.here, hop.topic, index, hop.direction == "inverse", needs)
        )
    return legs


def _translate_one(
    position: StoredOffset,
    found: list[tuple[RouteHop, ...]],
    runs: Callable[[FlowConfig], Runs],
    aliases: tuple[str, str],
) -> Translated | Untranslatable:
    if not found:
        return Untranslatable(
            position.as_json(),
            f"topic {position.topic} is not replicated from {aliases[0]} to {aliases[1]} "
            "(no flow, or chain of flows, copies it there)",
        )
    reason = ""
    for route in found:
        legs = _legs(route, position.partition, runs)
        if any(leg.needs_runs and leg.index is None for leg in legs):
            reason = reason or f"no runs of partition {position.partition} along " + ", ".join(
                leg.flow for leg in legs
            )
            continue  # the records did not come (or go) this way: another route may carry it
        result = carry(position.offset, position.partition, legs)
        if isinstance(result, str):
            return Untranslatable(position.as_json(), result)
        offset, match = result
        return Translated(
            position.topic,
            position.partition,
            position.offset,
            route[-1].next_topic,
            position.partition,
            offset,
            ", ".join(leg.flow for leg in legs),
            match.value,
        )
    return Untranslatable(position.as_json(), reason)


def translate_stored(
    config: FerryConfig,
    from_alias: str,
    to_alias: str,
    positions: Iterable[StoredOffset | Untranslatable],
    *,
    control: FlowControl | None = None,
    timeout: float = 10.0,
    runs: Callable[[FlowConfig], Runs] | None = None,
) -> list[Translated | Untranslatable]:
    """Each position translated from `from_alias` to `to_alias`, in order; an
    `Untranslatable` given stays as it is (a line that did not parse).

    Reads the runs in the targets of the flows on the way (not `from_alias` itself); a
    cluster that does not answer raises `KafkaUnavailableError` naming it. `control`: the
    flow `from->to`'s runtime override (topics added or removed over the API). `runs`:
    each flow's runs (tests); by default read from each flow's target.
    """
    for alias, option in ((from_alias, "--from"), (to_alias, "--to")):
        if alias not in config.clusters:
            raise ConfigError(
                f"{option} {alias}: no such cluster; the config has {', '.join(config.clusters)}"
            )
    if from_alias == to_alias:
        raise ConfigError(f"--from and --to are both {from_alias}; name two clusters")
    direct = f"{from_alias}->{to_alias}"

    def control_of(flow: FlowConfig) -> FlowControl | None:
        return control if flow.name == direct else None

    by_topic: dict[str, list[tuple[RouteHop, ...]]] = {}
    out: list[Translated | Untranslatable] = []
    with FlowRunsStores(config, timeout=timeout) as stores:
        read = runs or stores
        for position in positions:
            if isinstance(position, Untranslatable):
                out.append(position)
                continue
            if position.topic not in by_topic:
                by_topic[position.topic] = routes(
                    config, from_alias, position.topic, to_alias, control_of
                )
            found = by_topic[position.topic]
            out.append(_translate_one(position, found, read, (from_alias, to_alias)))
    return out
