"""The records of the consumer timestamps topic: pure, no client (see `consumer_timestamps`).

Records on `__consumer_timestamps` (compacted, one partition), UTF-8 JSON, compact separators:

    key   = ["<group>", "<topic>", <partition>]       e.g. ["billing","orders",3]
    value = {"offset": <n>, "timestamp": <ms>}        e.g. {"offset":1042,"timestamp":1700000000123}

`offset` is the offset the group committed (the next one it will read) and `timestamp` the
timestamp of the record before it, the last one the group consumed. Keys are deterministic,
so compaction keeps the latest position per group and partition; a null value forgets one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Message

__all__ = [
    "CONSUMER_TIMESTAMPS_TOPIC",
    "Key",
    "TimestampPosition",
    "consumed_positions",
    "decode",
    "decode_key",
    "encode",
]

CONSUMER_TIMESTAMPS_TOPIC = "__consumer_timestamps"

Key = tuple[str, int]  # (topic, partition)


@dataclass(frozen=True)
class TimestampPosition:
    """After a commit: the committed next offset, and the timestamp (ms) of the record before it."""

    offset: int
    timestamp: int

    def __post_init__(self) -> None:
        for name in ("offset", "timestamp"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode(group: str, topic: str, partition: int, pos: TimestampPosition) -> tuple[bytes, bytes]:
    """The (key, value) of the record saying `group` is at `pos` in `topic` `partition`."""
    if type(partition) is not int or partition < 0:
        raise ValueError(f"partition must be a non-negative integer, got {partition!r}")
    return (
        _json([group, topic, partition]),
        _json({"offset": pos.offset, "timestamp": pos.timestamp}),
    )


def _parse(data: bytes | None, what: str) -> Any:
    if data is None:
        raise ValueError(f"{what} is null")
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        raise ValueError(f"{what} is not UTF-8 JSON: {data[:100]!r}") from None


def decode_key(key: bytes | None) -> tuple[str, str, int]:
    """(group, topic, partition) of a record key; ValueError if it is not one."""
    parsed = _parse(key, "consumer timestamps key")
    ok = (
        isinstance(parsed, list)
        and len(parsed) == 3
        and isinstance(parsed[0], str)
        and isinstance(parsed[1], str)
        and type(parsed[2]) is int
        and parsed[2] >= 0
    )
    if not ok:
        raise ValueError(
            f'consumer timestamps key is not ["<group>", "<topic>", <partition>]: {key!r}'
        )
    return parsed[0], parsed[1], parsed[2]


def decode(key: bytes | None, value: bytes | None) -> tuple[str, str, int, TimestampPosition]:
    """(group, topic, partition, position) of a record; ValueError if it is not one."""
    group, topic, partition = decode_key(key)
    parsed = _parse(value, f"consumer timestamps value of {key!r}")
    if not isinstance(parsed, dict) or "offset" not in parsed or "timestamp" not in parsed:
        raise ValueError(
            f'consumer timestamps value is not {{"offset": n, "timestamp": ms}}: {value!r}'
        )
    try:
        pos = TimestampPosition(parsed["offset"], parsed["timestamp"])
    except ValueError as exc:
        raise ValueError(f"consumer timestamps value {value!r}: {exc}") from None
    return group, topic, partition, pos


def consumed_positions(messages: Iterable[Message]) -> dict[Key, TimestampPosition]:
    """Per partition: the offset after the last consumed record, and that record's timestamp.

    Messages carrying an error (end of partition, ...) are skipped. A record without a
    timestamp (pre-0.10 format) gives no position: a missing one only means more re-delivery.
    """
    last: dict[Key, tuple[int, int]] = {}
    for msg in messages:
        if msg.error() is not None:
            continue
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        assert topic is not None and partition is not None and offset is not None
        key = (topic, partition)
        if key not in last or offset > last[key][0]:
            last[key] = (offset, msg.timestamp()[1])
    return {k: TimestampPosition(o + 1, ts) for k, (o, ts) in last.items() if ts >= 0}
