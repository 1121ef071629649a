"""A TCP proxy that fails the way a network link fails, for fault tests.

It stands between ferry and one Kafka cluster: one port on 127.0.0.1 per broker, each forwarding
to 127.0.0.1:<that broker's port>. Its mode can be switched at any time:

- `open`: bytes cross both ways, each chunk `delay_ms` late in each direction, in order;
- `cut`: every connection is reset (RST) and new ones are accepted and reset at once, so a
  client learns within a round trip that the other side is gone;
- `blackhole`: nothing crosses and nothing is closed, the worst case, which a client can only
  learn of from its own timeouts. Bytes already read are held, and the proxy stops reading, so
  the sender's socket buffers fill as they would in front of a dead link;
- `open` again (`restore`): held bytes are delivered, in order, as TCP retransmission would
  deliver them once a partition heals.

`LinkProxy` runs in a background thread of the caller's process. `python -m
ferry.local.link_proxy --routes 40001:39001,40002:39002 --control-port P --ready-file F` (or
`serve`) runs one in a process of its own; `start_link_process` starts it, detached, and
`send_link_command` talks to it. The control protocol, on 127.0.0.1:P, is one line in (`open
[DELAY_MS]`, `cut`, `blackhole`, `restore` or `status`) and one JSON line out per connection:
`{"mode", "delay_ms", "connections": {"open", "total"}, "routes"}` or `{"error": "..."}`.

What a proxy cannot fake: in a black hole its own kernel still acknowledges what a client sends
until the buffers are full, and answers TCP keepalives, so the client sees silence, never a
dead peer at the TCP level.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ferry.errors import LocalClusterError
from ferry.local.loop_thread import LoopThread
from ferry.local.processes import live_process, running_command_line, stop_process

__all__ = [
    "COMMANDS",
    "Connections",
    "LinkProcessHandle",
    "LinkProxy",
    "Mode",
    "format_routes",
    "parse_routes",
    "send_link_command",
    "serve",
    "start_link_process",
]

Mode = Literal["open", "cut", "blackhole"]
MODES: tuple[Mode, ...] = ("open", "cut", "blackhole")
_MODE_NAMED: dict[str, Mode] = {mode: mode for mode in MODES}
COMMANDS = ("open", "cut", "blackhole", "restore", "status")

_MODULE = "ferry.local.link_proxy"  # how `is_running` recognises the process by its cmdline
_CHUNK = 64 * 1024
# Chunks read ahead of delivery, per direction: without a bound, a delay would let a fast
# sender fill the proxy's memory instead of its own socket buffer.
_QUEUE_CHUNKS = 128
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on with 0 s: close() sends RST, not FIN
# The proxy processes this process started, kept so that each is reaped by its own Popen (at
# `stop`) rather than left to Popen.__del__, which warns about a child still running.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
_Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass(frozen=True)
class Connections:
    """Client connections open now, and accepted since the proxy started (reset ones too)."""

    open: int
    total: int


def parse_routes(text: str) -> dict[int, int]:
    """`40001:39001,40002:39002` (listen port : target port) -> {40001: 39001, 40002: 39002}."""
    routes: dict[int, int] = {}
    for item in text.split(","):
        listen, sep, target = item.strip().partition(":")
        if not (sep and listen.strip().isdigit() and target.strip().isdigit()):
            raise ValueError(f"route {item.strip()!r} is not LISTEN_PORT:TARGET_PORT")
        routes[_port(int(listen))] = _port(int(target))
    return routes


def format_routes(routes: Mapping[int, int]) -> str:
    return ",".join(f"{listen}:{target}" for listen, target in routes.items())


def _port(port: int) -> int:
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is not between 1 and 65535")
    return port


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close a connection with RST, at once: what its peer sees when a link is cut."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed by its peer
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    writer.transport.abort()


class LinkProxy(LoopThread):
    """The proxy: `start()`/`stop()` or a context manager; `set_mode` from any thread. With a
    `control_port` it also answers the line protocol of the module's doc there. `stop()` closes
    the listeners and resets every connection."""

    def __init__(self, routes: Mapping[int, int], *, control_port: int | None = None) -> None:
        if not routes:
            raise ValueError("a link proxy needs at least one route")
        super().__init__("link-proxy")
        self.routes = {_port(listen): _port(target) for listen, target in routes.items()}
        self.control_port = control_port
        self._mode: Mode = "open"
        self._delay = 0.0  # seconds, each way
        self._total = 0
        self._connections: set[_Connection] = set()
        self._servers: list[asyncio.Server] = []
        self._gate = asyncio.Event()  # set while open: bytes, connections and FINs pass

    # --- from any thread ---------------------------------------------------------------------

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def delay_ms(self) -> float:
        return self._delay * 1000

    @property
    def connections(self) -> Connections:
        return Connections(len(self._connections), self._total)

    def status(self) -> dict[str, Any]:
        """What the control channel's `status` answers."""
        connections = self.connections
        return {
            "mode": self._mode,
            "delay_ms": self.delay_ms,
            "connections": {"open": connections.open, "total": connections.total},
            "routes": {str(listen): target for listen, target in self.routes.items()},
        }

    def set_mode(self, mode: Mode, delay_ms: float = 0) -> None:
        """Switch the link; returns once existing connections are in the new mode (after `cut`,
        their RSTs are sent)."""
        delay = _checked(mode, delay_ms)
        if self._loop is None:
            self._mode, self._delay = mode, delay
        else:
            self._call(self._apply(mode, delay))

    def restore(self) -> None:
        """Open, no delay: held bytes are delivered and connections carry on."""
        self.set_mode("open")

    # --- in the proxy's loop -----------------------------------------------------------------

    async def _open(self) -> None:
        self._gate = asyncio.Event()  # one per loop: an Event belongs to the loop it waits in
        self._apply_gate()
        ports: list[tuple[int, _Handler]] = [
            (listen, self._accepter(target)) for listen, target in self.routes.items()
        ]
        if self.control_port is not None:
            ports.append((self.control_port, self._control))
        for port, handler in ports:
            try:
                server = await asyncio.start_server(
                    handler, "127.0.0.1", port, limit=_CHUNK, reuse_address=True
                )
            except OSError as exc:
                raise LocalClusterError(
                    f"the link proxy cannot listen on 127.0.0.1:{port}: {exc}"
                ) from exc
            self._servers.append(server)

    async def _close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        await self._reset_all()

    def _apply_gate(self) -> None:
        if self._mode == "open":
            self._gate.set()
        else:
            self._gate.clear()

    async def _apply(self, mode: Mode, delay: float) -> None:
        self._mode, self._delay = mode, delay
        self._apply_gate()
        if mode == "cut":
            await self._reset_all()

    async def _reset_all(self) -> None:
        connections = list(self._connections)
        for connection in connections:
            connection.reset()
        # Their tasks end after the aborted sockets are closed, so the RSTs are out by then.
        await asyncio.gather(*(c.task for c in connections), return_exceptions=True)

    def _accepter(self, target: int) -> _Handler:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._total += 1
            if self._mode == "cut":
                _reset(writer)
                return
            connection = _Connection(self, reader, writer, target)
            self._connections.add(connection)
            try:
                await connection.run()
            except asyncio.CancelledError:
                # Reset by a cut or by stop(): the connection's end, not an error. (Python
                # 3.11's streams log a callback task that ends cancelled as if it had failed.)
                pass
            finally:
                self._connections.discard(connection)

        return accept

    async def _passable(self, due: float) -> None:
        """Wait until the link is open and the loop's clock has reached `due`."""
        loop = asyncio.get_running_loop()
        while True:
            await self._gate.wait()
            wait = due - loop.time()
            if wait <= 0:
                return
            await asyncio.sleep(wait)  # then look again: the link may have closed meanwhile

    async def _control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            try:
                answer = await self._command(line.decode().strip())
            except (ValueError, UnicodeDecodeError) as exc:
                answer = {"error": str(exc)}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, TimeoutError):
            pass  # the asker went away; there is no one to tell
        finally:
            writer.close()

    async def _command(self, text: str) -> dict[str, Any]:
        words = text.split()
        name, args = (words[0], words[1:]) if words else ("", [])
        if name not in COMMANDS or (args and name != "open") or len(args) > 1:
            raise ValueError(
                f"unknown command {text!r}; expected one of: open [DELAY_MS], cut, blackhole, "
                "restore, status"
            )
        if name == "restore":
            await self._apply("open", 0.0)
        elif name != "status":
            mode = _MODE_NAMED[name]
            try:
                delay_ms = float(args[0]) if args else 0.0
            except ValueError:
                raise ValueError(f"delay {args[0]!r} is not a number of milliseconds") from None
            await self._apply(mode, _checked(mode, delay_ms))
        return self.status()


def _checked(mode: str, delay_ms: float) -> float:
    """The delay in seconds, once `mode` and `delay_ms` make sense together."""
    if mode not in MODES:
        raise ValueError(f"unknown link mode {mode!r}; expected one of {', '.join(MODES)}")
    if not 0 <= delay_ms < float("inf"):
        raise ValueError(f"delay_ms must be a finite number >= 0, not {delay_ms}")
    if delay_ms and mode != "open":
        raise ValueError(f"a delay applies to an open link only, not to {mode!r}")
    return delay_ms / 1000


class _Connection:
    """One client's connection and, once the link lets it through, its broker's."""

    def __init__(
        self,
        proxy: LinkProxy,
        client_in: asyncio.StreamReader,
        client_out: asyncio.StreamWriter,
        target: int,
    ) -> None:
        self.proxy = proxy
        self.client_in = client_in
        self.client_out = client_out
        self.server_out: asyncio.StreamWriter | None = None
        self.target = target
        task = asyncio.current_task()
        assert task is not None
        self.task = task

    def reset(self) -> None:
        _reset(self.client_out)
        _reset(self.server_out)
        self.task.cancel()

    async def run(self) -> None:
        clean = False
        try:
            # In a black hole the broker never hears of a new connection: it is made on restore.
            await self.proxy._gate.wait()
            try:
                server_in, self.server_out = await asyncio.open_connection(
                    "127.0.0.1", self.target, limit=_CHUNK
                )
            except OSError:
                return  # the broker is down: the client is reset, the nearest to "refused"
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pump(self.client_in, self.server_out))
                group.create_task(self._pump(server_in, self.client_out))
            clean = True
        except Exception:
            pass  # one end failed: both are reset below, as the failure would reach them
        finally:
            if clean:
                self.client_out.close()
                if self.server_out is not None:
                    self.server_out.close()
            else:
                _reset(self.client_out)
                _reset(self.server_out)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        """Carry one direction until its sender closes it (a FIN is carried as a FIN)."""
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUE_CHUNKS)

        async def read() -> None:
            due = 0.0
            while True:
                # A black hole stops reading here, so the sender's buffers fill behind it.
                await proxy._gate.wait()
                try:
                    data = await source.read(_CHUNK)
                except OSError:
                    await proxy._passable(0)  # a reset crosses a black hole no sooner than bytes
                    raise
                # max(): a delay shortened meanwhile must not let a chunk overtake an earlier one.
                due = max(due, loop.time() + proxy._delay)
                await queue.put((due, data))
                if not data:
                    return

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                await proxy._passable(due)
                if not data:
                    break
                sink.write(data)
                await sink.drain()
            if sink.can_write_eof():
                sink.write_eof()

        # One group: if delivery fails, reading stops too instead of filling the queue for ever.
        async with asyncio.TaskGroup() as group:
            group.create_task(read())
            group.create_task(deliver())


# --- a proxy in a process of its own --------------------------------------------------------


def serve(routes: Mapping[int, int], control_port: int, ready_file: Path | None = None) -> None:
    """Run a proxy with its control port until SIGTERM or SIGINT. `ready_file` is written (JSON:
    pid, control_port, routes) once every port listens, and removed on exit."""
    # Blocked before the proxy's thread starts, so that the thread inherits the mask and the
    # signals wait for sigwait below instead of interrupting the loop.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    with LinkProxy(routes, control_port=control_port) as proxy:
        try:
            if ready_file is not None:
                tmp = ready_file.with_name(ready_file.name + ".tmp")
                handle = LinkProcessHandle(os.getpid(), control_port, proxy.routes)
                tmp.write_text(json.dumps(handle.to_json()) + "\n")
                tmp.replace(ready_file)  # whole or absent: the starter never reads half of it
            signal.sigwait({signal.SIGTERM, signal.SIGINT})
        finally:
            if ready_file is not None:
                ready_file.unlink(missing_ok=True)


@dataclass
class LinkProcessHandle:
    """A started proxy process: which pid, which control port, which routes. `to_json` and
    `from_json` keep it in a state file."""

    pid: int
    control_port: int
    routes: dict[int, int]

    def to_json(self) -> dict[str, Any]:
        routes = {str(listen): target for listen, target in self.routes.items()}
        return {"pid": self.pid, "control_port": self.control_port, "routes": routes}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LinkProcessHandle:
        routes = {int(listen): int(target) for listen, target in data["routes"].items()}
        return cls(int(data["pid"]), int(data["control_port"]), routes)

    def is_running(self) -> bool:
        """True while the recorded pid is still this proxy (not a recycled pid)."""
        cmdline = running_command_line(self.pid)
        return (
            cmdline is not None
            and _MODULE in cmdline
            and _option(cmdline, "--control-port") == str(self.control_port)
        )

    def command(self, command: str, delay_ms: float | None = None) -> dict[str, Any]:
        return send_link_command(self.control_port, command, delay_ms)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        process = live_process(self.pid) if self.is_running() else None
        what = f"the link proxy with control port {self.control_port}"
        try:
            stop_process(process, what, timeout)
        finally:
            child = _CHILDREN.pop(self.pid, None)
            if child is not None:
                child.poll()  # our own child: its Popen learns it was reaped


def _option(cmdline: Sequence[str], name: str) -> str | None:
    for i, arg in enumerate(cmdline[:-1]):
        if arg == name:
            return cmdline[i + 1]
    return None


def start_link_process(
    routes: Mapping[int, int], control_port: int, directory: Path, *, timeout: float = 20.0
) -> LinkProcessHandle:
    """Start `python -m ferry.local.link_proxy` in its own session (so that it outlives the CLI
    that started it) and wait until all its ports listen. Its log is
    `directory/link-proxy-<control_port>.log`."""
    directory.mkdir(parents=True, exist_ok=True)
    ready = directory / f"link-proxy-{control_port}.ready"
    log = directory / f"link-proxy-{control_port}.log"
    ready.unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        _MODULE,
        "--routes",
        format_routes(routes),
        "--control-port",
        str(control_port),
        "--ready-file",
        str(ready),
    ]
    # ferry's own source root first, so the child imports this ferry even when it is not installed.
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    _CHILDREN[process.pid] = process
    handle = LinkProcessHandle(process.pid, control_port, dict(routes))
    what = f"the link proxy with control port {control_port} (routes {format_routes(routes)})"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise LocalClusterError(
                f"{what} exited with code {process.returncode} while starting; {log}:\n{tail}"
            )
        if ready.exists():
            return handle
        time.sleep(0.02)
    with contextlib.suppress(LocalClusterError):
        handle.stop()
    raise LocalClusterError(f"{what} was not listening within {timeout:.0f} s; see {log}")


def send_link_command(
    control_port: int, command: str, delay_ms: float | None = None, *, timeout: float = 5.0
) -> dict[str, Any]:
    """Send one command to a proxy's control port and return its status (a dict: mode,
    delay_ms, connections, routes)."""
    if command not in COMMANDS:
        raise ValueError(f"unknown link command {command!r}; expected one of {COMMANDS}")
    if delay_ms is not None and command != "open":
        raise ValueError(f"a delay goes with 'open' only, not with {command!r}")
    line = command if delay_ms is None else f"open {delay_ms:g}"
    where = f"the link proxy on control port 127.0.0.1:{control_port}"
    try:
        with socket.create_connection(("127.0.0.1", control_port), timeout=timeout) as sock:
            sock.sendall(line.encode() + b"\n")
            with sock.makefile("rb") as answers:
                answer = answers.readline()
    except OSError as exc:
        raise LocalClusterError(
            f"{where} did not answer {line!r}: {exc}; is the proxy process running?"
        ) from exc
    try:
        reply = json.loads(answer)
        if not isinstance(reply, dict):
            raise ValueError
    except ValueError:
        raise LocalClusterError(f"{where} answered {line!r} with {answer[:200]!r}") from None
    if "error" in reply:
        raise LocalClusterError(f"{where} refused {line!r}: {reply['error']}")
    return reply


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m {_MODULE}",
        description="A TCP proxy that fails the way a network link fails, for fault tests.",
    )
    parser.add_argument("--routes", type=parse_routes, required=True, help="LISTEN:TARGET,...")
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--ready-file", type=Path, default=None)
    args = parser.parse_args(argv)
    serve(args.routes, args.control_port, args.ready_file)


if __name__ == "__main__":
    main()
