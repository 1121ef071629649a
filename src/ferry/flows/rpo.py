"""The recovery point objective (RPO) of a flow: how old the oldest source record not yet on the
target is, in seconds. Pure: the reading is `ferry.kafka.rpo_probe`.

Per source partition, with P the flow's replicated position (the next source offset the
target has not acknowledged) and E the source's end (its last stable offset):

- P >= E: caught up, RPO 0.
- P < E: the age, now minus its timestamp (at least 0), of the first *real* record at or after
  P. Offsets hold no record to lose where a transaction aborted, where a commit or abort marker
  sits and where compaction removed one, so P itself may name none; a record found at or past
  E arrived after E was read: as of E the partition was caught up, RPO 0.
- P < E and reading from P reached the end without a record (only markers and aborted
  records were left): RPO 0.
- the record could not be read in time, or it carries no timestamp: unknown (None). Never 0:
  an RPO read as 0 says nothing is at risk, which nobody knows then.

A flow's RPO is the worst of its partitions; unknown if any partition is unknown, since the
unknown one could be the worst.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "DESCRIPTION",
    "FirstRecord",
    "NoRecordBefore",
    "Probe",
    "flow_rpo",
    "lagging",
    "partition_rpo",
    "partition_rpos",
]

TP = tuple[str, int]
DESCRIPTION = (
    "Recovery point objective: age in seconds of the oldest source record not yet on the "
    "target (now minus the timestamp of the first real record at or after the flow's "
    "replicated position); 0 when caught up, NaN when it could not be read in time"
)


@dataclass(frozen=True)
class FirstRecord:
    """The first real record at or after the position: its offset and timestamp (ms since the
    epoch; None when the record has none)."""

    offset: int
    timestamp_ms: int | None


@dataclass(frozen=True)
class NoRecordBefore:
    """Reading from the position reached the partition's end, `end`, without a record."""

    end: int


# What reading from a position found; None when nothing was learnt in time (unknown).
Probe = FirstRecord | NoRecordBefore


def lagging(positions: Mapping[TP, int], ends: Mapping[TP, int]) -> dict[TP, int]:
    """The partitions behind their end, each with the position to read its first record from
    (0 for a partition with no position yet: nothing of it is on the target)."""
    return {tp: positions.get(tp, 0) for tp, end in ends.items() if positions.get(tp, 0) < end}


def partition_rpo(position: int, end: int, probe: Probe | None, now_ms: int) -> float | None:
    """Seconds since the oldest record at risk was written; 0 when caught up, None if unknown."""
    if position >= end:
        return 0.0
    if isinstance(probe, NoRecordBefore):
        # Reaching an end below E would leave [that end, E) unread: not known to be copied.
        return 0.0 if probe.end >= end else None
    if probe is None or probe.timestamp_ms is None or probe.timestamp_ms < 0:
        return None
    if probe.offset >= end:
        return 0.0
    return max(0, now_ms - probe.timestamp_ms) / 1000.0


def partition_rpos(
    positions: Mapping[TP, int],
    ends: Mapping[TP, int],
    probes: Mapping[TP, Probe],
    now_ms: int,
) -> dict[TP, float | None]:
    """The RPO of every partition of `ends` (a partition missing from `probes` is unknown
    unless caught up)."""
    return {
        tp: partition_rpo(positions.get(tp, 0), end, probes.get(tp), now_ms)
        for tp, end in ends.items()
    }


def flow_rpo(rpos: Iterable[float | None]) -> float | None:
    """The worst partition's RPO; None if any is unknown; 0 for a flow with no partition."""
    worst = 0.0
    for rpo in rpos:
        if rpo is None:
            return None
        worst = max(worst, rpo)
    return worst
