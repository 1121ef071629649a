"""The WAN link's arithmetic (bench.wan.model): hand-computed cases, no I/O."""

from __future__ import annotations

import pytest
from bench.wan.model import (
    Direction,
    OsBuffers,
    Window,
    Windows,
    bulk_transfer,
    effective_buffer,
    window_rate,
    windows_for,
)

OS = OsBuffers(explicit_max=4_194_304, autotune_max=33_554_432)


def test_a_chunk_departs_when_the_link_is_free_and_arrives_one_delay_after_its_last_byte() -> None:
    link = Direction(bandwidth=1000.0, delay=0.05)
    assert link.send(0.0, 100) == pytest.approx(0.15)  # 0.1 s on the wire + 0.05 s
    # Sent at 0.02 but the link is busy until 0.1: departs at 0.1.
    assert link.send(0.02, 200) == pytest.approx(0.35)
    # The link was idle since 0.3.
    assert link.send(1.0, 10) == pytest.approx(1.06)
    assert link.bytes == 310
    assert link.ack_due(1.06) == pytest.approx(1.11)


def test_a_window_refuses_more_than_its_room() -> None:
    window = Window(100)
    window.take(60)
    assert window.room() == 40
    with pytest.raises(ValueError, match="40 free"):
        window.take(41)
    window.release(60)
    assert window.room() == 100


def test_bandwidth_bounds_a_transfer_with_a_large_window() -> None:
    # 1,000 bytes at 1,000 B/s: the last byte leaves at 1.0 s and arrives 0.05 s later.
    assert bulk_transfer(1000, 100, 1000.0, 0.05, window=10_000) == pytest.approx(1.05)


def test_the_window_bounds_a_transfer_on_a_fast_link() -> None:
    # A 200-byte window, 0.1 s round trip: a window per round trip. 1,000 bytes are five
    # windows; the fifth leaves at 0.4 s and arrives at 0.45 s (the wire time is ~0).
    assert bulk_transfer(1000, 100, 1e12, 0.05, window=200) == pytest.approx(0.45)
    assert window_rate(200, 0.1) == pytest.approx(2000.0)


def test_connections_share_one_bandwidth() -> None:
    # Two connections of 500 bytes each on a 1,000 B/s link: together one second of wire.
    assert bulk_transfer(500, 100, 1000.0, 0.05, window=10_000, connections=2) == pytest.approx(
        1.05
    )
    # With windows small enough, two connections move twice what one does.
    one = bulk_transfer(1000, 100, 1e12, 0.05, window=200)
    two = bulk_transfer(1000, 100, 1e12, 0.05, window=200, connections=2)
    assert two == pytest.approx(one)


def test_a_buffer_left_to_the_os_grows_to_the_autotuning_ceiling() -> None:
    assert effective_buffer(0, OS) == 33_554_432
    assert effective_buffer(-1, OS) == 33_554_432
    assert effective_buffer(65536, OS) == 65536
    # An explicit size above net.core.rmem_max is capped there.
    assert effective_buffer(16_777_216, OS) == 4_194_304


def test_windows_of_each_client_from_its_settings() -> None:
    assert windows_for("java-consumer", {}, OS) == Windows(65536, 102400)
    assert windows_for("java-consumer", {"receive.buffer.bytes": "-1"}, OS) == Windows(
        33_554_432, 102400
    )
    assert windows_for("java-producer", {}, OS, broker_receive=-1) == Windows(32768, 33_554_432)
    assert windows_for("librdkafka", {}, OS) == Windows(33_554_432, 102400)
    assert windows_for("librdkafka", {"socket.receive.buffer.bytes": "1048576"}, OS) == Windows(
        1_048_576, 102400
    )
    with pytest.raises(ValueError, match="unknown client kind 'x'"):
        windows_for("x", {}, OS)


def test_a_64_kib_buffer_caps_a_connection_near_1_mb_per_second_at_60_ms() -> None:
    assert window_rate(65536, 0.06) == pytest.approx(1.09e6, rel=0.01)
