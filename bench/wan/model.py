"""The link's arithmetic, with no I/O: one direction's serializer, a connection's window, and
the TCP windows a replicator's settings give each direction.

A direction of the link is a single serializer shared by every connection: a chunk of n bytes
departs at max(now, the moment the link is free), occupies the link for n / bandwidth seconds
and arrives one one-way delay after its last byte left. A connection may have at most its
window of bytes in flight in one direction; bytes count as in flight from the moment they are
taken from the sender until their acknowledgement would be back, one one-way delay after they
were delivered. So one connection moves at most window / RTT, and all connections together at
most the bandwidth.

If the window were released on delivery instead of one delay later, a single connection
would reach twice window / RTT and the benchmark would flatter a small receive buffer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BROKER_RECEIVE_BUFFER",
    "JAVA_CONSUMER_RECEIVE_BUFFER",
    "JAVA_PRODUCER_RECEIVE_BUFFER",
    "LIBRDKAFKA_RECEIVE_BUFFER",
    "Direction",
    "OsBuffers",
    "Window",
    "Windows",
    "bulk_transfer",
    "effective_buffer",
    "window_rate",
    "windows_for",
]

# Kafka's defaults: a broker's `socket.receive.buffer.bytes`, a Java consumer's
# `receive.buffer.bytes`, librdkafka's `socket.receive.buffer.bytes` (0 = the OS's).
BROKER_RECEIVE_BUFFER = 102400
JAVA_CONSUMER_RECEIVE_BUFFER = 65536
JAVA_PRODUCER_RECEIVE_BUFFER = 32768
LIBRDKAFKA_RECEIVE_BUFFER = 0


@dataclass
class Direction:
    """One direction of the link: a serializer every connection shares."""

    bandwidth: float  # bytes per second
    delay: float  # one-way, seconds
    free_at: float = 0.0  # when the last chunk taken has left
    bytes: int = 0  # every byte ever sent this way

    def send(self, now: float, size: int) -> float:
        """Take `size` bytes onto the link at `now`; when they have all arrived."""
        depart = max(now, self.free_at)
        self.free_at = depart + size / self.bandwidth
        self.bytes += size
        return self.free_at + self.delay

    def ack_due(self, delivered: float) -> float:
        """When the acknowledgement of bytes delivered at `delivered` is back at the sender."""
        return delivered + self.delay


@dataclass
class Window:
    """One connection's bytes in flight in one direction, at most `size`."""

    size: int
    in_flight: int = 0

    def room(self) -> int:
        return max(0, self.size - self.in_flight)

    def take(self, size: int) -> None:
        if size > self.room():
            raise ValueError(f"{size} bytes do not fit a window with {self.room()} free")
        self.in_flight += size

    def release(self, size: int) -> None:
        self.in_flight -= size


def window_rate(window: int, rtt: float) -> float:
    """The most one connection moves per second: one window per round trip."""
    return window / rtt


def bulk_transfer(
    total: int, chunk: int, bandwidth: float, delay: float, window: int, connections: int = 1
) -> float:
    """When the last of `total` bytes per connection arrives, every sender starting at 0 with
    all its bytes ready and taking at most `chunk` (and at most its window's room) at a time,
    the connections taking turns. Delivery is at arrival (a receiver that always reads)."""
    link = Direction(bandwidth, delay)
    windows = [Window(window) for _ in range(connections)]
    left = [total] * connections
    acks: list[tuple[float, int, int]] = []  # (due, connection, bytes)
    now = 0.0
    last = 0.0
    while any(left) or acks:
        progressed = False
        for index, win in enumerate(windows):
            size = min(chunk, win.room(), left[index])
            if size > 0:
                win.take(size)
                left[index] -= size
                arrival = link.send(now, size)
                last = max(last, arrival)
                acks.append((link.ack_due(arrival), index, size))
                progressed = True
        if not progressed:
            acks.sort()
            due, index, size = acks.pop(0)
            now = max(now, due)
            windows[index].release(size)
    return last


@dataclass(frozen=True)
class OsBuffers:
    """The host's limits on socket buffers: an explicit size is capped at `explicit_max`
    (net.core.rmem_max); a size left to the OS grows up to `autotune_max` (the third field
    of net.ipv4.tcp_rmem)."""

    explicit_max: int
    autotune_max: int

    @classmethod
    def read(cls) -> OsBuffers:
        """This machine's (Linux's defaults where /proc does not say)."""
        try:
            explicit = int(Path("/proc/sys/net/core/rmem_max").read_text().split()[0])
            autotune = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
        except (OSError, IndexError, ValueError):
            return cls(212992, 6291456)
        return cls(explicit, autotune)


def effective_buffer(setting: int, os: OsBuffers) -> int:
    """The receive window a socket buffer setting gives: 0 or less leaves it to the OS."""
    return os.autotune_max if setting <= 0 else min(setting, os.explicit_max)


@dataclass(frozen=True)
class Windows:
    """A connection's window per direction, in bytes."""

    to_client: int  # responses: the client's receive buffer
    to_server: int  # requests: the broker's receive buffer


def windows_for(
    client: str,
    settings: Mapping[str, str],
    os: OsBuffers,
    broker_receive: int = BROKER_RECEIVE_BUFFER,
) -> Windows:
    """The windows of the client that carries the data across the link, from the settings it
    is given. `client`: `librdkafka` (ferry; `socket.receive.buffer.bytes`, default 0) or
    `java-consumer` / `java-producer` (MirrorMaker 2; `receive.buffer.bytes`, default 65536
    for consumers, 32768 for producers; -1 = the OS's)."""
    if client == "librdkafka":
        own = int(settings.get("socket.receive.buffer.bytes", LIBRDKAFKA_RECEIVE_BUFFER))
    elif client == "java-consumer":
        own = int(settings.get("receive.buffer.bytes", JAVA_CONSUMER_RECEIVE_BUFFER))
    elif client == "java-producer":
        own = int(settings.get("receive.buffer.bytes", JAVA_PRODUCER_RECEIVE_BUFFER))
    else:
        raise ValueError(f"unknown client kind {client!r}")
    return Windows(effective_buffer(own, os), effective_buffer(broker_receive, os))
