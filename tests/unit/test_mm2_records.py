"""Checkpoints and heartbeats in MM2's exact bytes.

The expected bytes are written out by hand from MM2's published schemas
(`org.apache.kafka.connect.mirror.Checkpoint` and `Heartbeat`), not produced by ferry's
encoder, so a wrong field order or width fails here.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.mm2_records import Checkpoint, Heartbeat, MM2FormatError


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


CHECKPOINT_KEY = (
    _hex("0002")
    + b"g1"  # group: INT16 length, UTF-8
    + _hex("0008")
    + b"A.orders"  # topic (remote name)
    + _hex("00000003")  # partition INT32
)
CHECKPOINT_VALUE = (
    _hex("0000")  # header: version INT16 = 0
    + _hex("000000000000002a")  # upstreamOffset INT64 = 42
    + _hex("0000000000000028")  # offset INT64 = 40
    + _hex("0002")
    + b"md"  # metadata STRING
)


def test_checkpoint_bytes_follow_mm2s_schema() -> None:
    checkpoint = Checkpoint("g1", "A.orders", 3, 42, 40, "md")
    assert checkpoint.key_bytes() == CHECKPOINT_KEY
    assert checkpoint.value_bytes() == CHECKPOINT_VALUE
    assert Checkpoint.from_bytes(CHECKPOINT_KEY, CHECKPOINT_VALUE) == checkpoint


def test_heartbeat_bytes_follow_mm2s_schema() -> None:
    key = _hex("0001") + b"A" + _hex("0001") + b"B"
    value = _hex("0000") + _hex("0000018bcfe56800")
    heartbeat = Heartbeat("A", "B", 0x18BCFE56800)
    assert heartbeat.key_bytes() == key
    assert heartbeat.value_bytes() == value
    assert Heartbeat.from_bytes(key, value) == heartbeat


def test_non_ascii_names_count_bytes_not_characters() -> None:
    key = Checkpoint("gröup", "t", 0, 0, 0).key_bytes()
    assert key[:2] == _hex("0006")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (CHECKPOINT_VALUE[:-1], "end too early"),
        (CHECKPOINT_VALUE + b"x", "trailing"),
        (_hex("0001") + CHECKPOINT_VALUE[2:], "version 1"),
        (CHECKPOINT_VALUE[:18] + _hex("ffff"), "null string"),
    ],
)
def test_malformed_checkpoints_are_refused(value: bytes, message: str) -> None:
    with pytest.raises(MM2FormatError, match=message):
        Checkpoint.from_bytes(CHECKPOINT_KEY, value)


names = st.text(max_size=40)
offsets = st.integers(-1, 2**63 - 1)


@given(names, names, st.integers(0, 2**31 - 1), offsets, offsets, names)
def test_checkpoints_round_trip(group, topic, partition, upstream, downstream, metadata) -> None:
    checkpoint = Checkpoint(group, topic, partition, upstream, downstream, metadata)
    again = Checkpoint.from_bytes(checkpoint.key_bytes(), checkpoint.value_bytes())
    assert again == checkpoint


@given(names, names, st.integers(0, 2**62))
def test_heartbeats_round_trip(source, target, timestamp) -> None:
    heartbeat = Heartbeat(source, target, timestamp)
    assert Heartbeat.from_bytes(heartbeat.key_bytes(), heartbeat.value_bytes()) == heartbeat
