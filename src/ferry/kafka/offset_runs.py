"""Exact offset runs: which downstream offsets a stretch of upstream offsets was copied to.

Pure code, no I/O, importable without PySpark (the offset client reads these records).

A run `(upstream_start, downstream_start, count)` says: upstream offsets
`upstream_start .. upstream_start + count - 1` were copied, in order and without a gap, to
downstream offsets `downstream_start .. downstream_start + count - 1`. An upstream offset
between two runs was never copied (compaction, a transaction marker, an aborted record, a
record skipped for loop prevention). If a run claimed an offset that was not copied, a
failed-over consumer would skip the record that really sits there, so runs are only ever
built from delivery reports, never from planned ranges.

Runs are stored in a compacted topic in the target, keyed by source topic, partition and
upstream start, so compaction never merges two runs; a run replayed after a crash (the same
upstream start copied again) replaces the older one, which points at the older copy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["OffsetRun", "OffsetSyncRecord", "RunBuilder", "runs_from_pairs"]


@dataclass(frozen=True)
class OffsetRun:
    upstream_start: int
    downstream_start: int
    count: int

    @property
    def upstream_end(self) -> int:
        """One past the last upstream offset of the run."""
        return self.upstream_start + self.count

    @property
    def downstream_end(self) -> int:
        return self.downstream_start + self.count


class RunBuilder:
    """Builds maximal runs from (upstream, downstream) pairs delivered in order."""

    __slots__ = ("_count", "_down", "_runs", "_up")

    def __init__(self) -> None:
        self._runs: list[OffsetRun] = []
        self._up = -1
        self._down = -1
        self._count = 0

    def add(self, upstream: int, downstream: int) -> None:
        if (
            self._count
            and upstream == self._up + self._count
            and downstream == self._down + self._count
        ):
            self._count += 1
            return
        self._close()
        self._up, self._down, self._count = upstream, downstream, 1

    def add_run(self, upstream: int, downstream: int, count: int) -> None:
        """`count` pairs at once: (upstream + i, downstream + i) for i in range(count)."""
        if count <= 0:
            return
        if (
            self._count
            and upstream == self._up + self._count
            and downstream == self._down + self._count
        ):
            self._count += count
            return
        self._close()
        self._up, self._down, self._count = upstream, downstream, count

    def _close(self) -> None:
        if self._count:
            self._runs.append(OffsetRun(self._up, self._down, self._count))
            self._count = 0

    def runs(self) -> list[OffsetRun]:
        self._close()
        return list(self._runs)


def runs_from_pairs(pairs: Iterable[tuple[int, int]]) -> list[OffsetRun]:
    builder = RunBuilder()
    for upstream, downstream in pairs:
        builder.add(upstream, downstream)
    return builder.runs()


@dataclass(frozen=True)
class OffsetSyncRecord:
    """One run of one source partition, as stored in the flow's offset-syncs topic."""

    source: str  # source cluster alias
    topic: str  # source topic
    partition: int
    run: OffsetRun

    def key_bytes(self) -> bytes:
        return json.dumps(
            [self.source, self.topic, self.partition, self.run.upstream_start],
            separators=(",", ":"),
        ).encode()

    def value_bytes(self) -> bytes:
        return json.dumps(
            {"downstream": self.run.downstream_start, "count": self.run.count},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_bytes(cls, key: bytes, value: bytes) -> OffsetSyncRecord:
        source, topic, partition, upstream = json.loads(key)
        body = json.loads(value)
        return cls(
            source,
            topic,
            int(partition),
            OffsetRun(int(upstream), int(body["downstream"]), int(body["count"])),
        )
