"""Record size: zigzag varints and a lone record's v2 batch size, as the broker counts them.

Worked examples are computed by hand from Kafka's v2 format (DefaultRecord / DefaultRecordBatch):
batch header 61 bytes (12-byte log overhead included), then
length | attributes(1) | timestampDelta | offsetDelta | keyLen | key | valueLen | value |
headerCount | (headerKeyLen | key utf-8 | headerValueLen | value)*, all lengths zigzag varints.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ferry.engine.copy.record_size import BATCH_OVERHEAD, single_record_batch_size, varint_size

INT64 = st.integers(-(2**63), 2**63 - 1)


def zigzag_varint(value: int) -> bytes:
    """Reference encoder: Kafka's ByteUtils.writeVarlong, for any signed 64-bit value."""
    assert -(2**63) <= value < 2**63
    zigzag = value * 2 if value >= 0 else -value * 2 - 1
    out = bytearray()
    while True:
        low = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def test_reference_encoder_matches_kafka_examples() -> None:
    assert zigzag_varint(0) == b"\x00"
    assert zigzag_varint(-1) == b"\x01"
    assert zigzag_varint(1) == b"\x02"
    assert zigzag_varint(-64) == b"\x7f"
    assert zigzag_varint(64) == b"\x80\x01"
    assert zigzag_varint(300) == b"\xd8\x04"


@given(st.integers(-300, 300) | st.integers(-(2**31), 2**31 - 1) | INT64)
@example(63)
@example(-64)
@example(64)
@example(-65)
@example(2**63 - 1)
@example(-(2**63))
def test_varint_size_matches_the_reference_encoder(value: int) -> None:
    assert varint_size(value) == len(zigzag_varint(value))


BOUNDARIES = [(0, 1), (-1, 1), (63, 1), (-64, 1), (64, 2), (-65, 2), (8191, 2), (8192, 3)]
BOUNDARIES += [(2**31 - 1, 5), (-(2**31), 5), (2**63 - 1, 10), (-(2**63), 10)]


@pytest.mark.parametrize(("value", "size"), BOUNDARIES)
def test_varint_size_boundaries(value: int, size: int) -> None:
    assert varint_size(value) == size


def test_batch_overhead_is_the_v2_header() -> None:
    # baseOffset 8, batchLength 4, leaderEpoch 4, magic 1, crc 4, attributes 2,
    # lastOffsetDelta 4, firstTimestamp 8, maxTimestamp 8, producerId 8, producerEpoch 2,
    # baseSequence 4, recordCount 4
    assert BATCH_OVERHEAD == 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 == 61


def test_null_key_null_value_no_headers() -> None:
    # attributes 1, tsDelta 1, offsetDelta 1, keyLen -1 -> 1, valueLen -1 -> 1, headers 0 -> 1
    body = 6
    assert single_record_batch_size(None, None, []) == 61 + 1 + body


def test_small_key_and_value() -> None:
    # 1 + 1 + 1 + (1 + 3) + (1 + 5) + 1 = 14; length varint(14) = 1
    assert single_record_batch_size(b"abc", b"hello", []) == 61 + 1 + 14


def test_empty_key_is_not_null() -> None:
    # empty key: keyLen 0 (1 byte) + 0 bytes, same size as null; a 1-byte key adds 1 byte
    assert single_record_batch_size(b"", None, []) == single_record_batch_size(None, None, [])
    assert single_record_batch_size(b"k", None, []) == single_record_batch_size(None, None, []) + 1


def test_headers_with_and_without_values() -> None:
    headers = [("ferry.origin", b"id|A|0|7|orders"), ("trace", None)]
    # 1 + 1 + 1 + keyLen -1 (1) + (1 + 2) value b"hi" + headerCount 2 (1) = 8
    # header 1: 1 + 12 ("ferry.origin") + 1 + 15 = 29
    # header 2: 1 + 5 ("trace") + valueLen -1 (1) = 7
    body = 8 + 29 + 7  # 44
    assert single_record_batch_size(None, b"hi", headers) == 61 + 1 + body


def test_header_names_count_utf8_bytes() -> None:
    # "é" is 1 character but 2 bytes in UTF-8
    body = 1 + 1 + 1 + 1 + 1 + 1 + (1 + 2) + 1  # ... headerCount 1, keyLen 2, "é", valueLen -1
    assert single_record_batch_size(None, None, [("é", None)]) == 61 + 1 + body


def test_large_value_needs_multi_byte_lengths() -> None:
    value = b"x" * 1_000_000
    # valueLen varint(1_000_000): zigzag 2_000_000 needs 3 bytes
    body = 1 + 1 + 1 + 1 + (3 + 1_000_000) + 1
    # record length varint(1_000_008): zigzag 2_000_016 needs 3 bytes
    assert single_record_batch_size(None, value, []) == 61 + 3 + body


def test_record_length_varint_grows_at_64_bytes() -> None:
    # body of 63 bytes: length fits 1 byte; body of 64 bytes: length takes 2
    def size(n: int) -> int:
        return single_record_batch_size(None, b"v" * n, [])

    # body = 1 + 1 + 1 + 1 + (1 + n) + 1 = n + 6 for n < 64
    assert size(57) == 61 + 1 + 63
    assert size(58) == 61 + 2 + 64
