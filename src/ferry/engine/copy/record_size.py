"""Exact size of a record alone in a Kafka v2 record batch, as a broker checks it.

Pure code. The broker refuses a batch larger than the topic's `max.message.bytes`; copying a
record that cannot fit would fail after the records behind it were already sent, so the copier
checks first and halts before it (nothing past it in its partition is copied).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BATCH_OVERHEAD", "single_record_batch_size", "varint_size"]

BATCH_OVERHEAD = 61  # v2 batch header, including the 12-byte log overhead


def varint_size(value: int) -> int:
    """Bytes of a zigzag varint (Kafka's record encoding)."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def _bytes_field(data: bytes | str | None) -> int:
    if data is None:
        return varint_size(-1)
    length = len(data.encode() if isinstance(data, str) else data)
    return varint_size(length) + length


def single_record_batch_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """Uncompressed size of a batch holding only this record (offset and time deltas 0)."""
    body = 1 + varint_size(0) + varint_size(0)  # attributes, timestamp delta, offset delta
    body += _bytes_field(key) + _bytes_field(value) + varint_size(len(headers))
    for name, data in headers:
        body += _bytes_field(name) + _bytes_field(data)
    return BATCH_OVERHEAD + varint_size(body) + body
