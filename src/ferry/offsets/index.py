"""The offset index: exact translation of consumer positions between two clusters.

Pure code, no I/O. Built from a flow's offset runs (see `ferry.kafka.offset_runs`), in the
order they were written. A position is "the offset of the next record to read", as Kafka
commits it.

Forward (failover, upstream -> downstream): the downstream offset of the first replicated
record at or after the upstream position. A position inside a gap (compaction, a transaction
marker, an aborted record) maps to the next replicated record; a position past everything
replicated maps to the replicated end, never beyond: a consumer there has seen every copy.

Inverse (failback, downstream -> upstream): the same rule with the roles swapped.

Why later runs win: after a crash Spark replays a batch and the same upstream offsets are
copied again. The replay's run is written after the first copy's (whose run may or may not
have been written). A consumer failing over must land in the *last* copy: the earlier one
sits before it in the target, so landing there would deliver those records twice.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from ferry.kafka.offset_runs import OffsetRun

__all__ = ["Match", "OffsetIndex", "RunMap", "Translation"]


class Match(Enum):
    EXACT = "exact"  # the position is a replicated record
    GAP = "gap"  # no record was replicated there; the next replicated one is used
    END = "end"  # at or past the replicated end (all replicated records were consumed)
    NOTHING = "nothing"  # no run at all for this partition: nothing replicated yet


@dataclass(frozen=True)
class Translation:
    offset: int
    match: Match
    # Offsets between the replicated end and the position: records consumed on one side that
    # are not (yet) on the other. Non-zero only for Match.END.
    beyond: int = 0


class RunMap:
    """Non-overlapping runs sorted by start; a run added later replaces what it overlaps.

    Keys are `upstream_start` of each run: build the inverse map from swapped runs.
    """

    __slots__ = ("_runs", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._runs: list[OffsetRun] = []

    def __len__(self) -> int:
        return len(self._runs)

    def runs(self) -> list[OffsetRun]:
        return list(self._runs)

    def add(self, run: OffsetRun) -> None:
        if run.count <= 0:
            return
        if not self._runs or run.upstream_start >= self._runs[-1].upstream_end:
            self._starts.append(run.upstream_start)  # the usual case: appended in order
            self._runs.append(run)
            return
        lo = bisect.bisect_right(self._starts, run.upstream_start) - 1
        lo = max(lo, 0)
        hi = bisect.bisect_left(self._starts, run.upstream_end)
        kept: list[OffsetRun] = []
        for old in self._runs[lo:hi]:
            if old.upstream_end <= run.upstream_start or old.upstream_start >= run.upstream_end:
                kept.append(old)
                continue
            if old.upstream_start < run.upstream_start:  # the part before the new run stays
                kept.append(
                    OffsetRun(
                        old.upstream_start,
                        old.downstream_start,
                        run.upstream_start - old.upstream_start,
                    )
                )
            if old.upstream_end > run.upstream_end:  # and the part after it
                shift = run.upstream_end - old.upstream_start
                kept.append(
                    OffsetRun(
                        run.upstream_end,
                        old.downstream_start + shift,
                        old.upstream_end - run.upstream_end,
                    )
                )
        kept.append(run)
        kept.sort(key=lambda r: r.upstream_start)
        self._runs[lo:hi] = kept
        self._starts[lo:hi] = [r.upstream_start for r in kept]

    def translate(self, position: int) -> Translation:
        if not self._runs:
            return Translation(0, Match.NOTHING)
        i = bisect.bisect_right(self._starts, position) - 1
        if i >= 0 and position < self._runs[i].upstream_end:
            run = self._runs[i]
            return Translation(run.downstream_start + position - run.upstream_start, Match.EXACT)
        if i + 1 < len(self._runs):
            return Translation(self._runs[i + 1].downstream_start, Match.GAP)
        last = self._runs[-1]
        return Translation(last.downstream_end, Match.END, position - last.upstream_end)

    def replicated_end(self) -> int | None:
        """One past the last replicated offset (on the key side), None when empty."""
        return self._runs[-1].upstream_end if self._runs else None


def _swapped(run: OffsetRun) -> OffsetRun:
    return OffsetRun(run.downstream_start, run.upstream_start, run.count)


class OffsetIndex:
    """Both directions for one source partition."""

    __slots__ = ("_forward", "_inverse")

    def __init__(self, runs: Iterable[OffsetRun] = ()) -> None:
        self._forward = RunMap()
        self._inverse = RunMap()
        for run in runs:
            self.add(run)

    def add(self, run: OffsetRun) -> None:
        self._forward.add(run)
        self._inverse.add(_swapped(run))

    def __len__(self) -> int:
        return len(self._forward)

    def downstream(self, upstream_position: int) -> Translation:
        """Where a consumer at `upstream_position` on the source resumes on the target."""
        return self._forward.translate(upstream_position)

    def upstream(self, downstream_position: int) -> Translation:
        """Where a consumer at `downstream_position` on the target resumes on the source."""
        return self._inverse.translate(downstream_position)

    def replicated_end(self) -> int | None:
        """One past the last upstream offset replicated, None before any run."""
        return self._forward.replicated_end()
