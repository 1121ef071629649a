"""MirrorMaker 2's checkpoint and heartbeat records, byte for byte.

Pure code, no I/O. MM2 encodes both with Kafka's protocol `Struct`: big-endian integers, and
strings as an INT16 length followed by UTF-8 bytes. A value starts with a header struct holding
a 2-byte version (0). Writing exactly these bytes lets Kafka's own `RemoteClusterUtils` and
MM2's console formatters read what ferry writes, and lets ferry read what MM2 wrote.

    checkpoint key    group STRING, topic STRING (the remote name), partition INT32
    checkpoint value  version INT16, upstreamOffset INT64, offset INT64, metadata STRING
    heartbeat key     sourceClusterAlias STRING, targetClusterAlias STRING
    heartbeat value   version INT16, timestamp INT64
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["VERSION", "Checkpoint", "Heartbeat", "MM2FormatError"]

VERSION = 0


class MM2FormatError(ValueError):
    """Bytes that are not an MM2 record of the expected kind."""


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._at = 0
        self._what = what

    def _take(self, size: int) -> bytes:
        if self._at + size > len(self._data):
            raise MM2FormatError(f"{self._what}: {len(self._data)} bytes end too early")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        size = self.int16()
        if size < 0:
            raise MM2FormatError(f"{self._what}: null string where MM2 never writes one")
        try:
            return self._take(size).decode()
        except UnicodeDecodeError as exc:
            raise MM2FormatError(f"{self._what}: string is not UTF-8 ({exc})") from None

    def version(self) -> int:
        version = self.int16()
        if version != VERSION:
            raise MM2FormatError(f"{self._what}: version {version}, only {VERSION} is known")
        return version

    def done(self) -> None:
        if self._at != len(self._data):
            extra = len(self._data) - self._at
            raise MM2FormatError(f"{self._what}: {extra} unexpected trailing bytes")


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0x7FFF:
        raise MM2FormatError(f"string of {len(data)} bytes does not fit an INT16 length")
    return struct.pack(">h", len(data)) + data


@dataclass(frozen=True)
class Checkpoint:
    """A group's position in a remote topic: `offset` on the target for `upstream_offset`."""

    group: str
    topic: str  # the remote topic's name on the target
    partition: int
    upstream_offset: int
    offset: int  # downstream
    metadata: str = ""

    def key_bytes(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value_bytes(self) -> bytes:
        return struct.pack(">hqq", VERSION, self.upstream_offset, self.offset) + _string(
            self.metadata
        )

    @classmethod
    def from_bytes(cls, key: bytes, value: bytes) -> Checkpoint:
        k = _Reader(key, "checkpoint key")
        group, topic, partition = k.string(), k.string(), k.int32()
        k.done()
        v = _Reader(value, "checkpoint value")
        v.version()
        upstream, downstream, metadata = v.int64(), v.int64(), v.string()
        v.done()
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True)
class Heartbeat:
    source_alias: str
    target_alias: str
    timestamp: int  # ms since the epoch, when the source emitted it

    def key_bytes(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value_bytes(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp)

    @classmethod
    def from_bytes(cls, key: bytes, value: bytes) -> Heartbeat:
        k = _Reader(key, "heartbeat key")
        source, target = k.string(), k.string()
        k.done()
        v = _Reader(value, "heartbeat value")
        v.version()
        timestamp = v.int64()
        v.done()
        return cls(source, target, timestamp)
