"""What the target holds against what the source holds: lost, duplicated, reordered records.

Pure: it compares two maps of partition -> records in log order, so it is tested on its own
(tests/unit/test_chaos_audit.py). A source record is identified by its offset; a copy names it
by its origin offset (the `ferry.origin` header) and carries a digest of its key and value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["FAULTS", "NO_FAULTS", "Audit", "PartitionAudit", "Rewind", "audit", "rewinds"]

Record = tuple[int, int]  # (offset in the source, digest of key and value)


@dataclass(frozen=True)
class PartitionAudit:
    partition: int
    source: int  # records the source holds
    copies: int  # copies the target holds
    lost: int  # source records with no copy
    duplicated: int  # copies beyond the first of a source record
    reordered: int  # first copies that come after a copy of a later source record
    mismatched: int  # copies whose key or value differ from the source record they name
    foreign: int  # copies naming an offset the source does not hold
    first_lost: int | None = None


# What can be wrong with a copy, as PartitionAudit counts it.
FAULTS = ("lost", "duplicated", "reordered", "mismatched", "foreign")
NO_FAULTS = dict.fromkeys(FAULTS, 0)


@dataclass(frozen=True)
class Audit:
    partitions: list[PartitionAudit] = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.partitions)

    def faults(self) -> dict[str, int]:
        """How many records each kind of fault touched; all 0 when the copy is exact."""
        return {name: self.total(name) for name in FAULTS}

    @property
    def exact(self) -> bool:
        """Every source record copied once, in order, unchanged, and nothing else."""
        return not any(self.faults().values())


def audit(source: Mapping[int, Sequence[Record]], target: Mapping[int, Sequence[Record]]) -> Audit:
    partitions = []
    for partition in sorted(set(source) | set(target)):
        held = dict(source.get(partition, ()))
        copies = target.get(partition, ())
        seen: set[int] = set()
        duplicated = reordered = mismatched = foreign = 0
        highest = -1
        for origin, digest in copies:
            if origin not in held:
                foreign += 1
                continue
            if held[origin] != digest:
                mismatched += 1
            if origin in seen:
                duplicated += 1
                continue
            seen.add(origin)
            if origin < highest:
                reordered += 1
            highest = max(highest, origin)
        missing = sorted(set(held) - seen)
        partitions.append(
            PartitionAudit(
                partition,
                source=len(held),
                copies=len(copies),
                lost=len(missing),
                duplicated=duplicated,
                reordered=reordered,
                mismatched=mismatched,
                foreign=foreign,
                first_lost=missing[0] if missing else None,
            )
        )
    return Audit(partitions)


@dataclass(frozen=True)
class Rewind:
    """A place where a partition's copies start over: at its `at`-th copy the origin falls
    back to `to`, after copies up to `highest`; `records` copies follow before they pass it."""

    partition: int
    at: int
    highest: int
    to: int
    records: int


def rewinds(target: Mapping[int, Sequence[Record]]) -> list[Rewind]:
    """Each point where copies name an origin at or below one already copied: where a copy
    started again from an earlier position, which is what duplicates come from."""
    found: list[Rewind] = []
    for partition, copies in sorted(target.items()):
        highest, open_at = -1, None
        for at, (origin, _digest) in enumerate(copies):
            if origin > highest:
                if open_at is not None:
                    found.append(
                        Rewind(partition, open_at, highest, copies[open_at][0], at - open_at)
                    )
                    open_at = None
                highest = origin
            elif open_at is None:
                open_at = at
        if open_at is not None:
            found.append(
                Rewind(partition, open_at, highest, copies[open_at][0], len(copies) - open_at)
            )
    return found
