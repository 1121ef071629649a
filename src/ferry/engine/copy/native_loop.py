"""The native copy loop (native/fastcopy.c): loading it, and reading its outcome.

`copy_bin_native` has `copy_bin`'s contract (python_loop.py): it returns per-partition results once
the target acknowledged every copy, or raises ReplicationError (halt) or KafkaUnavailableError
(retry later), with the same words (errors.py). The C loop owns its own consumer and
producer, so a `NativeCopier` replaces both clients of the Python loop.

The extension is not linked against librdkafka: it uses the library confluent-kafka already
loaded, made global here first, so both speak to one librdkafka of one version.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from ferry.engine.copy.ack_wait import ACK_TIMEOUT_SECONDS, STOP_GRACE_SECONDS, GaveUp
from ferry.engine.copy.deliveries import LATENCY_SAMPLE_MASK
from ferry.engine.copy.errors import (
    beyond_end_error,
    consume_error,
    delivery_error,
    produce_error,
    size_error,
    stall_error,
    unacknowledged_error,
)
from ferry.engine.copy.types import OPEN, CopyContext, CopyRange, PartitionResult, Slice
from ferry.engine.latency import BUCKETS_MS, Histogram
from ferry.errors import KafkaUnavailableError
from ferry.kafka.errors import UNREACHABLE_CODES
from ferry.kafka.offset_runs import OffsetRun
from ferry.kafka.provenance import origin_prefix

__all__ = ["NativeCopier", "copy_bin_native", "native_module", "unavailable_reason"]

# What the C loop needs to know besides the ranges, in the plain types it reads.
_UNREACHABLE = tuple(int(code) for code in UNREACHABLE_CODES)
_BUCKETS = tuple(float(bound) for bound in BUCKETS_MS)

_module: Any = None
_reason: str | None = None
_loaded = False


def _loaded_librdkafka() -> str:
    """The path of the librdkafka that confluent-kafka's extension loaded in this process."""
    import confluent_kafka.cimpl  # noqa: F401  (loads librdkafka)

    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if len(line.split()) >= 6 else ""
        if "librdkafka" in Path(path).name:
            return path
    raise OSError("confluent-kafka's librdkafka is not among this process's mapped files")


def native_module() -> Any:
    """The extension module, or None (then `unavailable_reason()` says why)."""
    global _module, _reason, _loaded
    if _loaded:
        return _module
    _loaded = True
    try:
        # RTLD_NOLOAD: the library is loaded already; this only makes its symbols global.
        ctypes.CDLL(_loaded_librdkafka(), mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
        from ferry.engine.copy import _fastcopy  # type: ignore[attr-defined]  # C extension, no stub
    except (ImportError, OSError) as exc:
        _reason = f"{type(exc).__name__}: {exc}"
        return None
    version_text, version = _fastcopy.library_version()
    if version < _fastcopy.HEADER_VERSION & ~0xFF:
        _reason = f"librdkafka {version_text} is older than the header it was built with"
        return None
    _module = _fastcopy
    return _module


def unavailable_reason() -> str | None:
    native_module()
    return _reason


class NativeCopier:
    """A source consumer and a target producer owned by the C loop; cache it per worker."""

    def __init__(self, consumer_settings: dict[str, str], producer_settings: dict[str, str]):
        module = native_module()
        if module is None:
            raise ImportError(f"ferry's native copier is not available: {_reason}")
        self._copier = module.Copier(consumer_settings, producer_settings)

    @property
    def broken(self) -> bool:
        """A copy failed: its clients may be fenced, or hold purged state. Drop it."""
        return bool(self._copier.broken)

    def release(self) -> None:
        """Give up the partitions a lease's slices kept assigned (copying nothing)."""
        self._copier.copy([], b"", (), 1.0, (), 0)

    def close(self) -> None:
        self._copier.close()


def copy_bin_native(
    copier: NativeCopier, ranges: list[CopyRange], ctx: CopyContext, slice: Slice | None = None
) -> list[PartitionResult]:
    """Copy the ranges in C; with a `slice`, the ranges may be open (see python_loop)."""
    work = [r for r in ranges if r.end > r.start]
    if not work:
        return []
    specs = []
    in_flight = slice.in_flight if slice is not None else {}
    for r in work:
        before, after = origin_prefix(ctx.source_cluster_id, ctx.source_alias, r.topic, r.partition)
        specs.append(
            (
                r.topic,
                r.partition,
                r.start,
                r.end,
                r.remote_topic,
                r.max_message_bytes,
                before.encode(),
                after.encode(),
                in_flight.get((r.topic, r.partition), 0),
            )
        )
    results, error = copier._copier.copy(
        specs,
        f"{ctx.target_cluster_id}|".encode(),
        _UNREACHABLE,
        ctx.stall_timeout,
        _BUCKETS,
        LATENCY_SAMPLE_MASK,
        slice.seconds if slice is not None else 0.0,
        slice is not None and slice.continuing,
        slice is None or slice.settle,
        ctx.stopping,
        STOP_GRACE_SECONDS,
        ACK_TIMEOUT_SECONDS,
    )
    if error is not None:
        raise _error_of(error, work, ctx)
    out = []
    for r, row in zip(work, results, strict=True):
        # An extension built before the lost offsets were reported returns nine values.
        copied, skipped, size, expired, runs, age, latency, position, unacked = row[:9]
        lost_first, lost_last = row[9:11] if len(row) >= 11 else (-1, -1)
        out.append(
            PartitionResult(
                r.topic,
                r.partition,
                r.start,
                position if r.end == OPEN else r.end,
                copied=copied,
                skipped=skipped,
                bytes=size,
                expired=expired,
                lost_first=lost_first,
                lost_last=lost_last,
                runs=[OffsetRun(*run) for run in runs],
                record_age=Histogram(list(age[0]), age[1]),
                latency=Histogram(list(latency[0]), latency[1]),
                in_flight=unacked,
                topic_id=r.topic_id,
            )
        )
    return out


def _error_of(error: tuple[Any, ...], work: list[CopyRange], ctx: CopyContext) -> Exception:
    kind, index, topic, partition, offset, code, reason, fatal, extra = error
    r = work[index] if 0 <= index < len(work) else None
    err = KafkaError(code, reason or None, fatal=bool(fatal))
    if kind == "size" and r is not None:
        return size_error(extra, r, offset, ctx)
    if kind == "produce" and r is not None:
        return produce_error(err, reason, r, offset, ctx)
    if kind == "delivery" and r is not None:
        return delivery_error(r.remote_topic, r.partition, offset, err, extra, r.topic, ctx)
    if kind == "recreated" and r is not None:
        return beyond_end_error(r, offset, extra, ctx)
    if kind in ("stopped", "unacknowledged"):
        # extra: the copies outstanding; offset: milliseconds without an acknowledgement
        return unacknowledged_error(GaveUp(extra, offset / 1000, kind == "stopped"), ctx)
    if kind == "stall":
        return stall_error(extra, topic, ctx)
    if kind == "consume":
        halt = consume_error(err, topic, partition, offset, ctx)
        if halt is not None:
            return halt
    if kind == "unaccounted" and r is not None:
        reason = (
            f"{extra} copies into {r.remote_topic} partition {r.partition} got no delivery "
            "report; nothing of this batch is committed, it is copied again"
        )
    where = f"{topic} partition {partition}" if topic else "the copy"
    return KafkaUnavailableError(
        ctx.target_alias if kind in ("delivery", "unaccounted") else ctx.source_alias,
        ctx.target_bootstrap if kind in ("delivery", "unaccounted") else ctx.source_bootstrap,
        f"{kind} failed ({where}): {reason or err.str()}",
    )
