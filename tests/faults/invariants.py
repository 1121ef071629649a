"""What a fault run must show on the target, checked from the records alone (Jepsen's Kafka
checker, Kafka's `transactions_test`), pure: the suite reads the records, this judges them.

A source record is identified by the unique id the producer put in it ("<run>-<seq>"); the
producer's delivery reports say where each acknowledged one landed (source partition, offset).
A copy names its source record twice: by the id it carries and by its `ferry.origin` header
(`Copy.from_origin` parses it with `ferry.kafka.provenance.Origin`). Where both are known the
acknowledgement wins, and a header that disagrees is counted (`misattributed`): the offset
translation and the audit trust that header, so a wrong one would mislead them silently.

Counts, with why each matters:
- lost: acknowledged and never read on the target. acks=all promised it; a consumer that failed
  over would never see it.
- duplicated: copies beyond the first of one record. Allowed at-least-once, never exactly-once.
- out_of_order: first copies that come, in one target partition, after a first copy of a later
  offset of the same source partition. A consumer relying on per-partition order would apply
  an older update over a newer one. Duplicates are not judged: a replayed stretch is only
  duplicates, so at-least-once is held to order too.
- aborted_read: copies of records whose source transaction aborted. A read_committed reader of
  the target would see data the source never committed.
- foreign: copies of ids the producer neither had acknowledged nor could leave undecided.
  Records whose produce ended without an answer (a timeout) are `indefinite`: they may or may
  not be on the source, so their copies are neither foreign nor their absence lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, get_args

from ferry.kafka.provenance import Origin

__all__ = [
    "KINDS",
    "Copy",
    "Example",
    "GroupVerdict",
    "Mode",
    "Verdict",
    "check",
    "group_offsets_after_failover",
    "unseen_series",
]

Mode = Literal["exactly-once", "at-least-once"]
KINDS = ("lost", "duplicated", "out_of_order", "aborted_read", "foreign", "misattributed")
_ALLOWED: dict[str, frozenset[str]] = {
    "exactly-once": frozenset(),
    "at-least-once": frozenset({"duplicated"}),
}


class Copy(NamedTuple):
    """One record read on the target: its id and the source record its header names.

    `at` is its own offset on the target; without it the checker uses its position in the list,
    which is not an offset under transactions (commit markers take offsets)."""

    id: str
    partition: int  # origin partition on the source
    offset: int  # origin offset on the source
    at: int | None = None

    @classmethod
    def from_origin(cls, record_id: str, origin: bytes, at: int | None = None) -> Copy:
        """From the `ferry.origin` header's value."""
        parsed = Origin.from_bytes(origin)
        return cls(record_id, parsed.partition, parsed.offset, at)


@dataclass(frozen=True)
class Example:
    """One offending record: where it is (the source for a lost record, the target for a
    copy) and its id."""

    side: Literal["source", "target"]
    partition: int
    offset: int
    id: str

    def __str__(self) -> str:
        return f"{self.side} {self.partition}@{self.offset} ({self.id})"


@dataclass(frozen=True)
class Verdict:
    """What the target held against what the producer was told, under one mode."""

    mode: Mode
    acknowledged: int  # distinct ids the producer had acknowledged
    indefinite: int  # ids whose produce ended without an answer (not acknowledged, not aborted)
    copies: int  # records read on the target, all of them
    copied: int  # distinct acknowledged ids read on the target
    indefinite_copied: int  # distinct indefinite ids read on the target
    lost: int
    duplicated: int
    out_of_order: int
    aborted_read: int
    foreign: int
    misattributed: int  # copies whose ferry.origin names another place than the ack did
    examples: Mapping[str, tuple[Example, ...]] = field(default_factory=dict)

    def violations(self, mode: Mode | None = None) -> tuple[str, ...]:
        """The kinds with a non-zero count that `mode` (default: the run's) forbids."""
        allowed = _ALLOWED[_mode(mode or self.mode)]
        return tuple(k for k in KINDS if getattr(self, k) and k not in allowed)

    def ok(self, mode: Mode | None = None) -> bool:
        return not self.violations(mode)

    def to_row(self) -> dict[str, int]:
        names = ("acknowledged", "indefinite", "copies", "copied", "indefinite_copied", *KINDS)
        return {name: int(getattr(self, name)) for name in names}

    def describe(self) -> str:
        head = (
            f"{self.mode}: {self.acknowledged} acknowledged records, {self.copied} copied "
            f"({self.copies} copies read; {self.indefinite_copied} of {self.indefinite} "
            f"unconfirmed records copied)"
        )
        if not any(getattr(self, k) for k in KINDS):
            return f"{head}; every acknowledged record copied once, in order, and nothing else."
        allowed = _ALLOWED[self.mode]
        parts = []
        for kind in KINDS:
            count = getattr(self, kind)
            if not count:
                continue
            shown = ", ".join(str(e) for e in self.examples.get(kind, ()))
            note = " (allowed)" if kind in allowed else ""
            parts.append(f"{kind.replace('_', ' ')} {count}{note}, e.g. {shown}")
        verdict = "OK" if self.ok() else "FAILED"
        return f"{verdict} {head}; " + "; ".join(parts) + "."


def check(
    acknowledged: Mapping[int, Iterable[tuple[int, str]]],
    aborted: Iterable[str],
    target: Mapping[int, Sequence[Copy | tuple[str, int, int]]],
    mode: Mode,
    indefinite: Iterable[str] = (),
    examples: int = 5,
) -> Verdict:
    """Judge the target's records (per target partition, in log order, read read_committed)
    against the acknowledged (per source partition: (offset, id)) and aborted ids.

    Ids must be unique per produce: an id acknowledged twice, or both acknowledged and aborted,
    is the harness's mistake and raises ValueError. An id both aborted (or acknowledged) and
    indefinite is taken as aborted (acknowledged): those answers are definite."""
    _mode(mode)
    where: dict[str, tuple[int, int]] = {}
    for partition, records in acknowledged.items():
        for offset, record_id in records:
            if record_id in where:
                raise ValueError(
                    f"record id {record_id!r} acknowledged twice: at {where[record_id]} and "
                    f"at {(partition, offset)}; ids must be unique per produce"
                )
            where[record_id] = (partition, offset)
    aborted_ids = set(aborted)
    if both := sorted(aborted_ids & where.keys()):
        raise ValueError(f"record ids both acknowledged and aborted: {both[:examples]}")
    undecided = set(indefinite) - where.keys() - aborted_ids

    found: dict[str, list[Example]] = {kind: [] for kind in KINDS}
    seen: set[str] = set()
    highest: dict[tuple[int, int], int] = {}  # (target, source partition) -> highest offset
    copies = 0
    for target_partition in sorted(target):
        for position, raw in enumerate(target[target_partition]):
            copy = Copy(*raw)
            copies += 1
            at = position if copy.at is None else copy.at
            example = Example("target", target_partition, at, copy.id)
            if copy.id in aborted_ids:
                found["aborted_read"].append(example)
                continue
            if copy.id in where:
                place = where[copy.id]
                if (copy.partition, copy.offset) != place:
                    found["misattributed"].append(example)
            elif copy.id in undecided:
                place = (copy.partition, copy.offset)
            else:
                found["foreign"].append(example)
                continue
            if copy.id in seen:
                found["duplicated"].append(example)
                continue
            seen.add(copy.id)
            stream = (target_partition, place[0])
            if place[1] < highest.get(stream, -1):
                found["out_of_order"].append(example)
            else:
                highest[stream] = place[1]
    found["lost"] = [
        Example("source", p, o, record_id)
        for record_id, (p, o) in sorted(where.items(), key=lambda item: item[1])
        if record_id not in seen
    ]
    return Verdict(
        mode=mode,
        acknowledged=len(where),
        indefinite=len(undecided),
        copies=copies,
        copied=len(seen & where.keys()),
        indefinite_copied=len(seen & undecided),
        lost=len(found["lost"]),
        duplicated=len(found["duplicated"]),
        out_of_order=len(found["out_of_order"]),
        aborted_read=len(found["aborted_read"]),
        foreign=len(found["foreign"]),
        misattributed=len(found["misattributed"]),
        examples={kind: tuple(found[kind][:examples]) for kind in KINDS if found[kind]},
    )


@dataclass(frozen=True)
class GroupVerdict:
    """Where a group's translated offsets on the target would start it, against where it was.

    `skipped` records are ones the group had not consumed on the source and would never read
    on the target: every copy lies before the translated offset. Starting past the first copy
    of the first unconsumed record is fine when a later copy of it follows (a replayed stretch),
    so that alone is not counted. `re_read` copies, of records it had consumed, are allowed."""

    partitions: int  # target partitions holding copies of partitions the group had consumed
    skipped: int
    re_read: int
    untranslated: tuple[int, ...]  # such target partitions with no translated offset
    examples: tuple[Example, ...] = ()  # first skipped records' first copies

    @property
    def ok(self) -> bool:
        return not self.skipped and not self.untranslated

    def to_row(self) -> dict[str, int]:
        return {
            "partitions": self.partitions,
            "skipped": self.skipped,
            "re_read": self.re_read,
            "untranslated": len(self.untranslated),
        }

    def describe(self) -> str:
        head = (
            f"group offsets on {self.partitions} target partitions: {self.skipped} records "
            f"skipped, {self.re_read} read again"
        )
        if self.skipped:
            head += ", e.g. " + ", ".join(str(e) for e in self.examples)
        if self.untranslated:
            head += f"; no translated offset for target partitions {list(self.untranslated)}"
        return ("OK " if self.ok else "FAILED ") + head + "."


def group_offsets_after_failover(
    committed_on_source: Mapping[int, int],
    translated_on_target: Mapping[int, int],
    target_records: Mapping[int, Sequence[Copy | tuple[str, int, int, int]]],
    examples: int = 5,
) -> GroupVerdict:
    """Would a group starting on the target at `translated_on_target` (target partition ->
    offset) miss any record it had not consumed on the source (`committed_on_source`: source
    partition -> the next offset it would have read)? The copies must carry their target offset
    (`Copy.at`); source partitions with no committed offset are not the group's and ignored."""
    partitions = re_read = 0
    skipped: list[Example] = []
    untranslated: list[int] = []
    for target_partition in sorted(target_records):
        copies = [Copy(*raw) for raw in target_records[target_partition]]
        mine = [c for c in copies if c.partition in committed_on_source]
        if not mine:
            continue
        partitions += 1
        if any(c.at is None for c in mine):
            raise ValueError(
                f"copies on target partition {target_partition} need their target offset (at)"
            )
        if target_partition not in translated_on_target:
            untranslated.append(target_partition)
            continue
        start = translated_on_target[target_partition]
        read: set[str] = set()
        first: dict[str, Copy] = {}
        for c in mine:
            consumed = c.offset < committed_on_source[c.partition]
            if c.at is not None and c.at >= start:
                read.add(c.id)
                re_read += consumed
            elif not consumed:
                first.setdefault(c.id, c)
        skipped.extend(
            Example("target", target_partition, int(c.at or 0), c.id)
            for record_id, c in first.items()
            if record_id not in read
        )
    return GroupVerdict(
        partitions=partitions,
        skipped=len(skipped),
        re_read=re_read,
        untranslated=tuple(untranslated),
        examples=tuple(skipped[:examples]),
    )


def unseen_series(samples: Iterable[tuple[float, int]], since: float | None = None) -> float | None:
    """The first time (at or after `since`, e.g. when the fault healed) at which the unseen
    count was 0, or None if no sample shows it: a test asserts `t - healed <= bound`.

    Samples are (time, unseen count) in any order; a negative count is a broken probe."""
    ordered = sorted(samples)
    if negative := [s for s in ordered if s[1] < 0]:
        raise ValueError(f"unseen counts cannot be negative: {negative[:3]}")
    return next((t for t, unseen in ordered if unseen == 0 and (since is None or t >= since)), None)


def _mode(mode: str) -> Mode:
    if mode not in get_args(Mode):
        raise ValueError(f"mode must be one of {get_args(Mode)}, not {mode!r}")
    return mode  # type: ignore[return-value]
