"""Which partitions each consumer group holds an offset in, folded from the records of a
cluster's `__consumer_offsets` topic. Pure code, no I/O.

A group coordinator writes every offset commit to `__consumer_offsets`. The key of an offset
record is a version INT16 (0 or 1) followed by group STRING, topic STRING, partition INT32 (a
STRING: an INT16 length, then UTF-8); its value is the offset, or null (a tombstone) once the
offset is gone: expired, deleted through the admin API, or the group deleted. Other key
versions are group metadata and member records, no offsets. Folded in log order (a group's
records all land in one partition), the records give each group's partitions with an offset.

Why: a consumer can only ask for the offsets of the partitions it names, and librdkafka's
cost of one such read grows with the square of the partitions named; asking each of 1,000
groups for every partition of a 10,000-partition cluster spent a minute of a switchover.
Asking only the partitions a group committed in costs almost nothing.
"""

from __future__ import annotations

import struct

__all__ = ["CommittedPartitions", "OffsetsLogFormatError", "offset_key"]

TP = tuple[str, int]
OFFSET_KEY_VERSIONS = frozenset({0, 1})


class OffsetsLogFormatError(ValueError):
    """A record of `__consumer_offsets` whose key is not what its version says."""


def _string(key: bytes, at: int) -> tuple[str, int]:
    if at + 2 > len(key):
        raise OffsetsLogFormatError(f"offset key of {len(key)} bytes ends inside a length")
    (size,) = struct.unpack_from(">h", key, at)
    start, end = at + 2, at + 2 + size
    if size < 0 or end > len(key):
        raise OffsetsLogFormatError(f"offset key of {len(key)} bytes: string length {size}")
    try:
        return key[start:end].decode(), end
    except UnicodeDecodeError as exc:
        raise OffsetsLogFormatError(f"offset key: a string that is not UTF-8 ({exc})") from None


def offset_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset record's key; None for a key of another kind."""
    if len(key) < 2:
        raise OffsetsLogFormatError(f"key of {len(key)} bytes has no version")
    (version,) = struct.unpack_from(">h", key)
    if version not in OFFSET_KEY_VERSIONS:
        return None
    group, at = _string(key, 2)
    topic, at = _string(key, at)
    if at + 4 != len(key):
        raise OffsetsLogFormatError(
            f"offset key of group {group!r}, topic {topic!r}: {len(key) - at} bytes where "
            "the partition's 4 are"
        )
    (partition,) = struct.unpack_from(">i", key, at)
    return group, topic, int(partition)


class CommittedPartitions:
    """Each group's partitions with an offset, as of the records applied so far."""

    def __init__(self) -> None:
        self._by_group: dict[str, set[TP]] = {}

    def apply(self, key: bytes | None, has_value: bool) -> None:
        """One record, in log order: an offset set (`has_value`) or taken away (tombstone)."""
        if key is None:
            raise OffsetsLogFormatError("a record without a key")
        parsed = offset_key(key)
        if parsed is None:
            return
        group, topic, partition = parsed
        partitions = self._by_group.setdefault(group, set())
        if has_value:
            partitions.add((topic, partition))
        else:
            partitions.discard((topic, partition))

    def of(self, group: str) -> frozenset[TP] | None:
        """`group`'s partitions with an offset; None if no record ever named the group."""
        partitions = self._by_group.get(group)
        return None if partitions is None else frozenset(partitions)

    def groups(self) -> list[str]:
        return sorted(self._by_group)
