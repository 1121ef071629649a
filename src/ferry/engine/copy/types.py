"""What both copy loops share: a range to copy, the flow's facts, a partition's outcome.

Pure data. The planner (Spark side) builds `CopyRange`s; the Python loop, the native loop and
exactly-once mode take them with a `CopyContext` and return `PartitionResult`s, whose exact
offset runs the sink commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ferry.engine.latency import Histogram
from ferry.kafka.offset_runs import OffsetRun

__all__ = [
    "EARLIEST",
    "OPEN",
    "CopyContext",
    "CopyRange",
    "PartitionResult",
    "RecordTranslator",
    "Slice",
]

EARLIEST = -2  # librdkafka's OFFSET_BEGINNING: "the earliest offset still retained"
OPEN = 2**63 - 1  # the end of a leased range: no end, copy what arrives


@dataclass(frozen=True)
class Slice:
    """One stretch of a lease (engine/copy/lease.py): copy open ranges for `seconds`, then
    return; `continuing`: the consumer is assigned already. `settle`: wait until the target
    acknowledged every copy; else (the native loop) copies still in flight carry over to the
    next slice, which is told how many per partition (`in_flight`, from the results)."""

    seconds: float
    continuing: bool = False
    settle: bool = True
    in_flight: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class CopyRange:
    """Source offsets [start, end); start is EARLIEST for a partition never copied before,
    end is OPEN in a lease (copy what arrives)."""

    topic: str
    partition: int
    start: int
    end: int
    remote_topic: str
    max_message_bytes: int
    # The source topic's id (a UUID) when planned; "" not known. Committed beside the position,
    # so a topic deleted and created again is told from the one ferry copied (plan/topic_ids).
    topic_id: str = ""


class RecordTranslator(Protocol):
    """Rewrites a copy's key and value before it is produced (engine/copy/schemas.py: schema
    ids translated to the target registry's); appends headers; raises rather than copy
    something it could not translate."""

    def translate(
        self,
        r: CopyRange,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        result: PartitionResult,
        ctx: CopyContext,
    ) -> tuple[bytes | None, bytes | None]: ...


@dataclass(frozen=True)
class CopyContext:
    """Facts about the flow that every range of a bin shares."""

    source_alias: str
    source_bootstrap: str
    source_cluster_id: str
    target_alias: str
    target_bootstrap: str
    target_cluster_id: str
    stall_timeout: float = 120.0
    # Schema ids rewritten for the target's registry (sync.schemas.enabled with both
    # registries named); None: bytes copied unchanged. The Python loop only.
    translator: RecordTranslator | None = None
    # Where a task says something once (a partition held on a schema registry, and its end):
    # ferry run's console and events; None: nowhere.
    notice: Callable[[str], None] | None = None
    # ferry run is stopping: a wait for the target's acknowledgements may give up
    # (engine/copy/ack_wait.py); None: it never does.
    stopping: Callable[[], bool] | None = None


@dataclass
class PartitionResult:
    topic: str
    partition: int
    start: int
    end: int
    copied: int = 0
    skipped: int = 0
    bytes: int = 0
    expired: int = 0  # planned records the source deleted (retention) before they were copied
    # The offsets of those records: first and last (-1: none). Between them only `expired`
    # offsets were lost when the source deleted more than once in one result.
    lost_first: int = -1
    lost_last: int = -1
    runs: list[OffsetRun] = field(default_factory=list)
    record_age: Histogram = field(default_factory=Histogram)  # ms, consume time - timestamp
    latency: Histogram = field(default_factory=Histogram)  # ms, target ack - timestamp
    in_flight: int = 0  # copies not acknowledged yet (a lease's slice that did not settle)
    topic_id: str = ""  # the range's source topic id, committed beside the position
    # With schema translation on: keys and values whose schema id was rewritten, and those
    # copied unchanged (not in the registry wire format, an id the source registry does not
    # know, or the same id on both registries).
    schema_translated: int = 0
    schema_unchanged: int = 0
    # Why the partition holds at `end` at the end of this result ("": it does not): a schema
    # registry did not answer for that record's schema id (engine/copy/schemas.py).
    held: str = ""
