"""The link-fault proxy (ferry.local.link_proxy) in front of a local TCP echo server: open,
delayed, cut, black-holed and restored, in this process and as a process of its own."""

from __future__ import annotations

import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local.link_proxy import (
    Connections,
    LinkProcessHandle,
    LinkProxy,
    parse_routes,
    send_link_command,
    start_link_process,
)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass  # the proxy reset it: that is what the tests do


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def proxy(echo_port: int) -> Iterator[tuple[LinkProxy, int]]:
    port = _free_port()
    with LinkProxy({port: echo_port}) as link:
        yield link, port


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _recv_exactly(sock: socket.socket, size: int, timeout: float = 5) -> bytes:
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < size:
        if time.monotonic() > deadline:
            raise AssertionError(f"got {len(data)} of {size} bytes within {timeout} s")
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {size} bytes")
        data += chunk
    return data


def _echo(sock: socket.socket, data: bytes) -> None:
    sock.sendall(data)
    assert _recv_exactly(sock, len(data)) == data


def _assert_ended(sock: socket.socket, timeout: float = 2) -> None:
    """The connection is reset or closed within `timeout`: a recv sees RST or EOF."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(1024)
    except (ConnectionResetError, BrokenPipeError):
        return
    except TimeoutError:
        raise AssertionError(f"the connection was still open after {timeout} s") from None
    assert data == b"", f"got {data!r} instead of a reset"


def _assert_silent(sock: socket.socket, seconds: float = 0.5) -> None:
    """Nothing arrives for `seconds`, and neither a FIN nor a RST."""
    sock.settimeout(seconds)
    with pytest.raises(TimeoutError):
        data = sock.recv(1024)
        raise AssertionError(f"got {data!r} through a black hole")


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


def test_open_forwards_both_ways_and_counts_connections(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    with _connect(port) as first, _connect(port) as second:
        _echo(first, b"hello")
        _echo(second, b"x" * 300_000)  # several chunks, in order
        assert link.mode == "open"
        assert link.connections == Connections(open=2, total=2)
    _wait_for(lambda: link.connections.open == 0, "both connections closing at the proxy")
    assert link.connections.total == 2


def test_cut_resets_existing_connections_and_new_ones(
    proxy: tuple[LinkProxy, int], caplog: pytest.LogCaptureFixture
) -> None:
    link, port = proxy
    with _connect(port) as sock:
        _echo(sock, b"before")
        link.set_mode("cut")
        _assert_ended(sock)
    try:
        with _connect(port) as fresh:
            _assert_ended(fresh)
    except ConnectionError:
        pass  # refused or reset while connecting: as good
    assert link.mode == "cut"
    assert link.connections.open == 0

    link.restore()
    with _connect(port) as sock:
        _echo(sock, b"after")
    # A reset connection is the proxy's doing, not an error for asyncio to log.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_blackhole_holds_bytes_until_restore(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    with _connect(port) as sock:
        _echo(sock, b"before")
        link.set_mode("blackhole")
        sock.sendall(b"held")
        _assert_silent(sock)
        assert link.connections.open == 1  # not closed either

        link.restore()
        assert link.mode == "open"
        assert _recv_exactly(sock, 4) == b"held"
        _echo(sock, b"after")


def test_blackhole_accepts_new_connections_and_forwards_nothing(
    proxy: tuple[LinkProxy, int],
) -> None:
    link, port = proxy
    link.set_mode("blackhole")
    with _connect(port) as sock:
        sock.sendall(b"hello?")
        _assert_silent(sock)
        link.restore()
        assert _recv_exactly(sock, 6) == b"hello?"


def test_blackhole_stops_reading_so_the_sender_is_held_back(
    proxy: tuple[LinkProxy, int],
) -> None:
    """A sender into a black hole fills the socket buffers and then blocks; nothing is dropped."""
    link, port = proxy
    limit = 256 * 1024 * 1024
    with _connect(port) as sock:
        _echo(sock, b"before")
        link.set_mode("blackhole")
        sock.setblocking(False)
        sent = 0
        block = b"y" * 65536
        while sent < limit:
            try:
                sent += sock.send(block)
            except BlockingIOError:
                break
        assert sent < limit, "the proxy kept reading from a black hole"

        link.restore()
        sock.setblocking(True)
        assert _recv_exactly(sock, sent, timeout=10) == b"y" * sent


def test_delay_adds_at_least_the_delay_each_way(proxy: tuple[LinkProxy, int]) -> None:
    link, port = proxy
    link.set_mode("open", delay_ms=100)
    assert (link.mode, link.delay_ms) == ("open", 100)
    with _connect(port) as sock:
        began = time.monotonic()
        _echo(sock, b"ping")
        assert time.monotonic() - began >= 0.2
        # Small chunks sent one after another arrive whole and in order.
        for i in range(20):
            sock.sendall(f"{i:03d}".encode())
        assert _recv_exactly(sock, 60) == b"".join(f"{i:03d}".encode() for i in range(20))

        link.restore()
        assert link.delay_ms == 0
        _echo(sock, b"fast again")


def test_a_route_to_a_closed_port_resets_the_client() -> None:
    port = _free_port()
    with LinkProxy({port: _free_port()}):
        try:
            sock = _connect(port)
        except ConnectionResetError:
            # The reset can arrive before a connect with a timeout (non-blocking, then
            # polled) reads its result: the client was reset all the same.
            return
        with sock:
            _assert_ended(sock)


def test_bad_modes_and_routes_are_refused() -> None:
    link = LinkProxy({_free_port(): _free_port()})
    with pytest.raises(ValueError, match="delay applies to an open link only"):
        link.set_mode("blackhole", delay_ms=10)
    with pytest.raises(ValueError, match=">= 0"):
        link.set_mode("open", delay_ms=-1)
    with pytest.raises(ValueError, match="unknown link mode"):
        link.set_mode("down")  # type: ignore[arg-type]
    assert parse_routes("40001:39001, 40002:39002") == {40001: 39001, 40002: 39002}
    with pytest.raises(ValueError, match="'40001' is not LISTEN_PORT:TARGET_PORT"):
        parse_routes("40001")
    with pytest.raises(ValueError, match="not between 1 and 65535"):
        parse_routes("40001:70000")


def test_the_control_channel_in_process(echo_port: int) -> None:
    port, control = _free_port(), _free_port()
    with LinkProxy({port: echo_port}, control_port=control):
        status = send_link_command(control, "open", delay_ms=5)
        assert status["mode"] == "open"
        assert status["delay_ms"] == 5
        assert status["routes"] == {str(port): echo_port}
        assert send_link_command(control, "cut")["mode"] == "cut"
        assert send_link_command(control, "restore")["delay_ms"] == 0
        with socket.create_connection(("127.0.0.1", control), timeout=5) as sock:
            sock.sendall(b"explode\n")
            assert b"unknown command 'explode'" in sock.makefile("rb").readline()


def test_no_proxy_on_the_control_port_is_a_local_cluster_error() -> None:
    port = _free_port()
    with pytest.raises(LocalClusterError, match=f"control port 127.0.0.1:{port}"):
        send_link_command(port, "status", timeout=1)


def test_the_proxy_as_a_process_of_its_own(echo_port: int, tmp_path: Path) -> None:
    port, control = _free_port(), _free_port()
    handle = start_link_process({port: echo_port}, control, tmp_path)
    try:
        assert handle.is_running()
        assert LinkProcessHandle.from_json(handle.to_json()) == handle
        with _connect(port) as sock:
            _echo(sock, b"through a process")
            status = send_link_command(control, "status")
            assert status["connections"] == {"open": 1, "total": 1}
            assert handle.command("blackhole")["mode"] == "blackhole"
            sock.sendall(b"held")
            _assert_silent(sock, 0.3)
            assert handle.command("open", delay_ms=20) == {
                **status,
                "mode": "open",
                "delay_ms": 20,
            }
            assert _recv_exactly(sock, 4) == b"held"
            send_link_command(control, "cut")
            _assert_ended(sock)
    finally:
        handle.stop()
    assert not handle.is_running()
    assert not (tmp_path / f"link-proxy-{control}.ready").exists()
    with pytest.raises(LocalClusterError, match=str(control)):
        send_link_command(control, "status", timeout=1)
