"""Each group's partitions with an offset, folded from `__consumer_offsets` records
(kafka/offsets_log.py). The keys below are bytes a Kafka 4.1 broker wrote: offset commits, and
records of other kinds (a classic group's metadata, a consumer-protocol group's metadata and a
member's)."""

from __future__ import annotations

import pytest

from ferry.kafka.offsets_log import CommittedPartitions, OffsetsLogFormatError, offset_key

G1_T1_P0 = bytes.fromhex("0001000267310002743100000000")
G1_T1_P2 = bytes.fromhex("0001000267310002743100000002")
X_OFFSETS_P2 = bytes.fromhex("000100017800125f5f636f6e73756d65725f6f66667365747300000002")
CLASSIC_GROUP_METADATA = bytes.fromhex("00020009672d636c6173736963")  # g-classic
CONSUMER_GROUP_METADATA = bytes.fromhex("0003000a672d636f6e73756d6572")  # g-consumer
CONSUMER_GROUP_MEMBER = bytes.fromhex(
    "0005000a672d636f6e73756d65720016367158616c5771735167794441664370354f33616d77"
)


def test_an_offset_key_names_group_topic_and_partition() -> None:
    assert offset_key(G1_T1_P0) == ("g1", "t1", 0)
    assert offset_key(X_OFFSETS_P2) == ("x", "__consumer_offsets", 2)
    assert offset_key(bytes.fromhex("0000") + G1_T1_P2[2:]) == ("g1", "t1", 2)  # version 0


def test_keys_of_other_kinds_are_not_offsets() -> None:
    assert offset_key(CLASSIC_GROUP_METADATA) is None
    assert offset_key(CONSUMER_GROUP_METADATA) is None
    assert offset_key(CONSUMER_GROUP_MEMBER) is None


@pytest.mark.parametrize(
    ("key", "says"),
    [
        (b"\x00", "no version"),
        (G1_T1_P0[:-1], "where the partition's 4 are"),
        (G1_T1_P0 + b"\x00", "where the partition's 4 are"),
        (bytes.fromhex("00010009"), "string length 9"),
        (bytes.fromhex("00010002ffff"), "not UTF-8"),
    ],
)
def test_a_broken_offset_key_is_an_error_that_says_why(key: bytes, says: str) -> None:
    with pytest.raises(OffsetsLogFormatError, match=says):
        offset_key(key)


def test_commits_and_tombstones_folded_in_log_order() -> None:
    folded = CommittedPartitions()
    folded.apply(G1_T1_P0, has_value=True)
    folded.apply(G1_T1_P2, has_value=True)
    folded.apply(CLASSIC_GROUP_METADATA, has_value=True)
    folded.apply(G1_T1_P0, has_value=True)  # committed again: still one partition
    assert folded.of("g1") == {("t1", 0), ("t1", 2)}

    folded.apply(G1_T1_P0, has_value=False)  # the offset deleted or expired
    assert folded.of("g1") == {("t1", 2)}
    folded.apply(G1_T1_P2, has_value=False)
    assert folded.of("g1") == frozenset()  # known, with no offset left
    folded.apply(G1_T1_P2, has_value=True)  # committed again after its tombstone
    assert folded.of("g1") == {("t1", 2)}
    assert folded.of("never-seen") is None
    assert folded.groups() == ["g1"]


def test_a_record_without_a_key_is_not_kafkas() -> None:
    with pytest.raises(OffsetsLogFormatError, match="without a key"):
        CommittedPartitions().apply(None, has_value=True)
