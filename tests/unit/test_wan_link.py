"""The WAN link proxy (bench.wan.link) on loopback: delay, bandwidth and window, as bounds."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
from bench.wan.link import LinkProcess, LinkSpec, WanLink
from bench.wan.model import Windows

BIG = Windows(to_client=1 << 24, to_server=1 << 24)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _Sink(socketserver.BaseRequestHandler):
    """Reads everything, then answers with the number of bytes it read."""

    def handle(self) -> None:
        total = 0
        while data := self.request.recv(65536):
            total += len(data)
            if data.endswith(b"!"):
                break
        self.request.sendall(str(total).encode())


def _serve(handler: type[socketserver.BaseRequestHandler]) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def echo_port() -> Iterator[int]:
    yield from _serve(_Echo)


@pytest.fixture
def sink_port() -> Iterator[int]:
    yield from _serve(_Sink)


def _recv_exactly(sock: socket.socket, size: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"got {len(data)} of {size} bytes within {timeout:.0f} s")
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data += sock.recv(size - len(data))
    return data


def _send_bulk(port: int, size: int, timeout: float) -> float:
    """Seconds to push `size` bytes through the sink and hear back its count."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        began = time.monotonic()
        sock.sendall(b"x" * (size - 1) + b"!")
        answer = _recv_exactly(sock, len(str(size)), timeout)
        took = time.monotonic() - began
    assert int(answer) == size
    return took


def test_a_round_trip_takes_at_least_the_rtt(echo_port: int) -> None:
    spec = LinkSpec(rtt=0.08, bandwidth_bits=80e6)
    with WanLink(echo_port, spec, BIG) as link:
        with socket.create_connection(("127.0.0.1", link.port), timeout=10) as sock:
            for _ in range(3):
                began = time.monotonic()
                sock.sendall(b"ping")
                assert _recv_exactly(sock, 4, 10) == b"ping"
                assert time.monotonic() - began >= 0.08
        assert link.counts() == (12, 12)
        assert link.connections == 1


def test_bulk_transfer_stays_within_the_bandwidth(sink_port: int) -> None:
    spec = LinkSpec(rtt=0.02, bandwidth_bits=16e6)  # 2 MB/s
    size = 2_000_000
    with WanLink(sink_port, spec, BIG) as link:
        took = _send_bulk(link.port, size, 30)
        assert link.counts()[0] == size
    assert size / took <= spec.bandwidth * 1.02
    assert size / took >= spec.bandwidth * 0.3  # the link is used, not idle


def test_one_connection_stays_within_its_window_per_round_trip(sink_port: int) -> None:
    spec = LinkSpec(rtt=0.05, bandwidth_bits=1e9)
    windows = Windows(to_client=1 << 24, to_server=20_000)  # 400 kB/s per connection
    size = 400_000
    with WanLink(sink_port, spec, windows) as link:
        took = _send_bulk(link.port, size, 30)
    assert size / took <= 20_000 / 0.05 * 1.02
    assert size / took >= 20_000 / 0.05 * 0.3


def test_connections_share_the_bandwidth(sink_port: int) -> None:
    spec = LinkSpec(rtt=0.02, bandwidth_bits=16e6)  # 2 MB/s for both together
    size = 1_000_000
    with WanLink(sink_port, spec, BIG) as link:
        began = time.monotonic()
        threads = [
            threading.Thread(target=_send_bulk, args=(link.port, size, 30)) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(40)
        took = time.monotonic() - began
        assert link.counts()[0] == 2 * size
    assert 2 * size / took <= spec.bandwidth * 1.02


def test_stop_closes_open_connections(echo_port: int) -> None:
    link = WanLink(echo_port, LinkSpec(0.01, 1e9), BIG).start()
    sock = socket.create_connection(("127.0.0.1", link.port), timeout=10)
    sock.sendall(b"x")
    assert _recv_exactly(sock, 1, 10) == b"x"
    link.stop()
    sock.settimeout(10)
    assert sock.recv(10) == b""  # closed by the link, not left hanging
    sock.close()


def test_a_link_in_its_own_process_delays_and_counts(echo_port: int) -> None:
    with LinkProcess(echo_port, LinkSpec(rtt=0.06, bandwidth_bits=80e6), BIG) as link:
        with socket.create_connection(("127.0.0.1", link.port), timeout=10) as sock:
            began = time.monotonic()
            sock.sendall(b"ping")
            assert _recv_exactly(sock, 4, 10) == b"ping"
            assert time.monotonic() - began >= 0.06
        deadline = time.monotonic() + 5
        while link.counts() != (4, 4):  # synced from the link's process every 50 ms
            assert time.monotonic() < deadline, f"counts stayed {link.counts()}"
            time.sleep(0.01)
        assert link.connections == 1
