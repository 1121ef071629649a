"""A TCP proxy that behaves like a wide-area link: a delay each way, one bandwidth budget per
direction shared by every connection, and a TCP window per connection (`bench.wan.model`).

`WanLink` listens on 127.0.0.1 and forwards every connection to 127.0.0.1:`target_port`. It
runs its own asyncio loop in a background thread (`ferry.local.loop_thread.LoopThread`), started
by `start()` and ended by `stop()` (or as a context manager); `LinkProcess` runs one in a
process of its own. Bytes taken from a sender wait in the sender's socket while the window is
full, so the sender feels the link as it would a real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from bench.wan.model import Direction, Window, Windows
from ferry.local.loop_thread import LoopThread

__all__ = ["LinkProcess", "LinkSpec", "WanLink", "parse_links"]

CHUNK = 256 * 1024  # the most one read takes: how finely the link schedules a busy sender
# A directory: every link writes there, when it stops, each chunk it carried (connection,
# direction, when read from the sender, when delivered, bytes) as JSON lines, for
# `bench.wan.fetch_cycles`.
TRACE_ENV = "FERRY_BENCH_LINK_TRACE"
_BUFFER_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class LinkSpec:
    """A link's round trip (seconds) and bandwidth (bits per second, as links are sold)."""

    rtt: float
    bandwidth_bits: float

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_bits / 8

    @property
    def label(self) -> str:
        bits = self.bandwidth_bits
        speed = f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"
        return f"{self.rtt * 1000:.0f} ms / {speed}"


def parse_links(text: str) -> list[LinkSpec]:
    """`60:200,100:1000` (RTT ms : Mbit/s) -> link specs."""
    links = []
    for item in text.split(","):
        rtt, _, mbit = item.strip().partition(":")
        if not rtt or not mbit:
            raise ValueError(f"link {item.strip()!r} is not RTT_MS:MBIT_PER_S")
        links.append(LinkSpec(float(rtt) / 1000, float(mbit) * 1e6))
    return links


class WanLink(LoopThread):
    """The proxy. `to_server` / `to_client` count every byte that crossed each way. `stop()`
    closes the listener and every connection."""

    def __init__(
        self, target_port: int, spec: LinkSpec, windows: Windows, listen_port: int = 0
    ) -> None:
        super().__init__("wan-link")
        self.target_port = target_port
        self.spec = spec
        self.windows = windows
        self.port = listen_port
        self.to_server = Direction(spec.bandwidth, spec.rtt / 2)
        self.to_client = Direction(spec.bandwidth, spec.rtt / 2)
        self.connections = 0
        trace_dir = os.environ.get(TRACE_ENV)
        self._trace: list[tuple[int, str, float, float, int]] | None = [] if trace_dir else None
        self._trace_dir = trace_dir
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    # --- from the caller's thread -----------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        """(bytes to the server, bytes to the client) so far."""
        return self.to_server.bytes, self.to_client.bytes

    # --- in the link's loop -----------------------------------------------------------------

    async def _open(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, limit=_BUFFER_LIMIT, reuse_address=True
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._trace is not None and self._trace_dir:
            name = f"link-{self.port}-{time.time():.0f}.jsonl"
            with open(os.path.join(self._trace_dir, name), "w", encoding="utf-8") as f:
                for row in self._trace:
                    f.write(json.dumps(row) + "\n")

    async def _accept(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(client_out)
        try:
            try:
                server_in, server_out = await asyncio.open_connection(
                    "127.0.0.1", self.target_port, limit=_BUFFER_LIMIT
                )
            except OSError:
                client_out.close()
                return
            self._writers.add(server_out)
            self.connections += 1
            conn = self.connections
            await asyncio.gather(
                self._pump(client_in, server_out, self.to_server, self.windows.to_server, conn),
                self._pump(server_in, client_out, self.to_client, self.windows.to_client, conn),
                return_exceptions=True,
            )
            self._writers.discard(server_out)
        except asyncio.CancelledError:
            pass  # the link is stopping: the connection ends here, and that is all
        finally:
            self._writers.discard(client_out)
            self._tasks.discard(task)

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        direction: Direction,
        window_size: int,
        conn: int = 0,
    ) -> None:
        """Carry one direction of one connection until its sender closes it."""
        loop = asyncio.get_running_loop()
        window = Window(window_size)
        room = asyncio.Event()
        room.set()
        queue: asyncio.Queue[tuple[float, float, bytes] | None] = asyncio.Queue()
        way = "server" if direction is self.to_server else "client"
        trace = self._trace

        def release(size: int) -> None:
            window.release(size)
            room.set()

        async def deliver() -> None:
            while (item := await queue.get()) is not None:
                taken, arrival, data = item
                wait = arrival - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                sink.write(data)
                await sink.drain()  # a receiver that does not read holds its window
                if trace is not None:
                    trace.append((conn, way, taken, loop.time(), len(data)))
                loop.call_at(direction.ack_due(loop.time()), release, len(data))
            sink.close()

        delivering = asyncio.create_task(deliver())
        try:
            while True:
                while window.room() <= 0:
                    room.clear()
                    await room.wait()
                data = await source.read(min(CHUNK, window.room()))
                if not data:
                    break
                window.take(len(data))
                now = loop.time()
                queue.put_nowait((now, direction.send(now, len(data)), data))
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            delivering.cancel()
            raise
        finally:
            queue.put_nowait(None)
        with contextlib.suppress(ConnectionError, OSError):
            await delivering


class LinkProcess:
    """A `WanLink` in a process of its own, so that nothing else in the benchmark's process
    (its producer, its pollers) can hold up the link's timers. The same face as `WanLink`:
    `start()`, `stop()`, `counts()`, `connections`, `port`; the counts are at most
    `_SYNC_SECONDS` old."""

    def __init__(
        self, target_port: int, spec: LinkSpec, windows: Windows, listen_port: int = 0
    ) -> None:
        self.target_port = target_port
        self.spec = spec
        self.windows = windows
        self.port = listen_port
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._shared = context.Array("q", 4)  # to server, to client, connections, port
        self._stop = context.Event()
        self._ready = context.Event()
        self._process = context.Process(
            target=_serve_link,
            args=(target_port, spec, windows, listen_port, self._shared, self._stop, self._ready),
            name="wan-link",
            daemon=True,
        )

    def start(self) -> LinkProcess:
        self._process.start()
        deadline = time.monotonic() + 30
        while not self._ready.wait(0.1):
            if not self._process.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the link to port {self.target_port} did not start")
        self.port = int(self._shared[3])
        return self

    def stop(self) -> None:
        """Ask the process to close every connection and exit; end it by its handle if not."""
        if self._process.pid is None:
            return
        self._stop.set()
        self._process.join(15)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def __enter__(self) -> LinkProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def counts(self) -> tuple[int, int]:
        return int(self._shared[0]), int(self._shared[1])

    @property
    def connections(self) -> int:
        return int(self._shared[2])


_SYNC_SECONDS = 0.05


def _serve_link(
    target_port: int,
    spec: LinkSpec,
    windows: Windows,
    listen_port: int,
    shared: Any,
    stop: Any,
    ready: Any,
) -> None:
    link = WanLink(target_port, spec, windows, listen_port).start()
    try:
        shared[3] = link.port
        ready.set()
        while not stop.wait(_SYNC_SECONDS):
            shared[0], shared[1] = link.counts()
            shared[2] = link.connections
        shared[0], shared[1] = link.counts()
        shared[2] = link.connections
    finally:
        link.stop()
