"""Consumer timestamps: the record format, positions from consumed messages, commit-then-record."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from ferry.errors import FerryError
from ferry.local.broker import free_port
from ferry.offsets.consumer_timestamps import (
    CONSUMER_TIMESTAMPS_TOPIC,
    ConsumerTimestampsRecorder,
    TimestampPosition,
    consumed_positions,
    decode,
    decode_key,
    encode,
    offsets_for_timestamps,
    read_group_timestamps,
)

naturals = st.integers(min_value=0, max_value=2**63 - 1)


def message(
    topic: str, partition: int, offset: int, timestamp: int = -1, error: KafkaError | None = None
) -> Message:
    return Message(
        topic=topic, partition=partition, offset=offset, timestamp=(1, timestamp), error=error
    )


@given(group=st.text(), topic=st.text(), partition=naturals, offset=naturals, ts=naturals)
def test_encode_decode_round_trip(
    group: str, topic: str, partition: int, offset: int, ts: int
) -> None:
    pos = TimestampPosition(offset, ts)
    key, value = encode(group, topic, partition, pos)
    assert decode(key, value) == (group, topic, partition, pos)
    assert decode_key(key) == (group, topic, partition)
    # Compaction keeps one record per key only if the key never depends on the position.
    assert encode(group, topic, partition, TimestampPosition(0, 0))[0] == key


def test_format_is_compact_utf8_json() -> None:
    key, value = encode("grüppe", "orders", 3, TimestampPosition(1042, 1_700_000_000_123))
    assert key == '["grüppe","orders",3]'.encode()
    assert value == b'{"offset":1042,"timestamp":1700000000123}'


def test_decode_ignores_extra_value_fields() -> None:
    got = decode(b'["g","t",0]', b'{"offset":5,"timestamp":6,"later":"field"}')
    assert got == ("g", "t", 0, TimestampPosition(5, 6))


GOOD_KEY = b'["g","t",0]'
GOOD_VALUE = b'{"offset":1,"timestamp":2}'


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"not json", GOOD_VALUE, "key is not UTF-8 JSON"),
        (b"\xff\xfe", GOOD_VALUE, "key is not UTF-8 JSON"),
        (None, GOOD_VALUE, "key is null"),
        (b'["g","t"]', GOOD_VALUE, "key is not"),
        (b'["g","t",0,1]', GOOD_VALUE, "key is not"),
        (b'{"g":"t"}', GOOD_VALUE, "key is not"),
        (b'["g",7,0]', GOOD_VALUE, "key is not"),
        (b'["g","t",-1]', GOOD_VALUE, "key is not"),
        (b'["g","t",true]', GOOD_VALUE, "key is not"),
        (b'["g","t",1.0]', GOOD_VALUE, "key is not"),
        (GOOD_KEY, None, "value of .* is null"),
        (GOOD_KEY, b"{", "value of .* is not UTF-8 JSON"),
        (GOOD_KEY, b"[1,2]", "value is not"),
        (GOOD_KEY, b'{"offset":1}', "value is not"),
        (GOOD_KEY, b'{"offset":-1,"timestamp":2}', "offset must be a non-negative integer"),
        (GOOD_KEY, b'{"offset":1,"timestamp":"2"}', "timestamp must be a non-negative integer"),
        (GOOD_KEY, b'{"offset":1.5,"timestamp":2}', "offset must be a non-negative integer"),
        (GOOD_KEY, b'{"offset":true,"timestamp":2}', "offset must be a non-negative integer"),
    ],
)
def test_decode_rejects_garbage_with_a_clear_message(
    key: bytes | None, value: bytes | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        decode(key, value)


def test_encode_rejects_negative_partition() -> None:
    with pytest.raises(ValueError, match="partition must be a non-negative integer"):
        encode("g", "t", -1, TimestampPosition(0, 0))


# --- positions from consumed messages --------------------------------------------------------


consumed = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 1000), naturals),
    max_size=40,
    unique_by=lambda m: (m[0], m[1], m[2]),
)


@given(consumed)
def test_positions_are_one_past_the_highest_offset_with_its_timestamp(
    msgs: list[tuple[str, int, int, int]],
) -> None:
    messages = [message(t, p, o, timestamp=ts) for t, p, o, ts in msgs]
    # An error event (end of partition) in the batch is not a record.
    eof = KafkaError(KafkaError._PARTITION_EOF)
    messages.append(message("a", 0, 5000, timestamp=1, error=eof))

    got = consumed_positions(messages)

    expected = {}
    for t, p, o, ts in sorted(msgs, key=lambda m: m[2]):
        expected[(t, p)] = TimestampPosition(o + 1, ts)
    assert got == expected


def test_a_record_without_timestamp_gives_no_position() -> None:
    assert consumed_positions([message("t", 0, 7, timestamp=-1)]) == {}


# --- commit, then record ---------------------------------------------------------------------


@dataclass
class Events:
    log: list[str] = field(default_factory=list)


@dataclass
class FakeCommitConsumer:
    events: Events
    fail_with: KafkaException | None = None
    partition_error: KafkaError | None = None
    committed: list[tuple[str, int, int]] = field(default_factory=list)

    def commit(self, *, offsets: list[TopicPartition], asynchronous: bool) -> list[Any]:
        assert asynchronous is False
        self.events.log.append("commit")
        if self.fail_with is not None:
            raise self.fail_with
        self.committed += [(tp.topic, tp.partition, tp.offset) for tp in offsets]
        return [
            SimpleNamespace(
                topic=tp.topic, partition=tp.partition, offset=tp.offset, error=self.partition_error
            )
            for tp in offsets
        ]


@dataclass
class FakeProducer:
    events: Events
    unacknowledged: int = 0
    refuse: KafkaError | None = None
    sent: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    callbacks: list[Any] = field(default_factory=list)

    def produce(self, topic: str, *, value: bytes, key: bytes, on_delivery: Any) -> None:
        self.events.log.append("produce")
        self.sent.append((topic, key, value))
        self.callbacks.append(on_delivery)

    def flush(self, timeout: float) -> int:
        self.events.log.append("flush")
        for callback in self.callbacks:
            callback(self.refuse, None)
        self.callbacks.clear()
        return self.unacknowledged


class FakeAdmin:
    """Says the timestamps topic already exists."""

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={"ts": object()}, brokers={1: object()})


def _recorder(producer: FakeProducer) -> ConsumerTimestampsRecorder:
    return ConsumerTimestampsRecorder(
        {"bootstrap.servers": "a:9092"}, group="G", topic="ts", producer=producer, admin=FakeAdmin()
    )


BATCH = [
    message("orders", 0, 10, timestamp=100),
    message("orders", 0, 11, timestamp=101),
    message("orders", 1, 4, timestamp=99),
]


def test_commit_then_one_record_per_partition_then_flush() -> None:
    events = Events()
    consumer, producer = FakeCommitConsumer(events), FakeProducer(events)

    got = _recorder(producer).commit(consumer, BATCH)

    assert got == {
        ("orders", 0): TimestampPosition(12, 101),
        ("orders", 1): TimestampPosition(5, 99),
    }
    assert consumer.committed == [("orders", 0, 12), ("orders", 1, 5)]
    assert events.log == ["commit", "produce", "produce", "flush"]
    assert sorted(producer.sent) == sorted(
        [
            ("ts", *encode("G", "orders", 0, got[("orders", 0)])),
            ("ts", *encode("G", "orders", 1, got[("orders", 1)])),
        ]
    )


@pytest.mark.parametrize("failure", ["raises", "partition error"])
def test_failed_commit_records_nothing(failure: str) -> None:
    events = Events()
    error = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    consumer = (
        FakeCommitConsumer(events, fail_with=KafkaException(error))
        if failure == "raises"
        else FakeCommitConsumer(events, partition_error=error)
    )
    producer = FakeProducer(events)

    with pytest.raises(KafkaException):
        _recorder(producer).commit(consumer, BATCH)
    assert producer.sent == []
    assert "produce" not in events.log


def test_unacknowledged_timestamps_raise_a_timeout_naming_the_topic() -> None:
    events = Events()
    producer = FakeProducer(events, unacknowledged=2)
    with pytest.raises(TimeoutError, match="2 records to ts not acknowledged"):
        _recorder(producer).commit(FakeCommitConsumer(events), BATCH)


def test_refused_timestamps_raise_naming_the_topic() -> None:
    events = Events()
    producer = FakeProducer(events, refuse=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(FerryError, match="could not write to ts"):
        _recorder(producer).commit(FakeCommitConsumer(events), BATCH)


def test_nothing_consumed_commits_nothing() -> None:
    events = Events()
    error = message("orders", 0, 3, error=KafkaError(KafkaError._PARTITION_EOF))
    assert _recorder(FakeProducer(events)).commit(FakeCommitConsumer(events), [error]) == {}
    assert events.log == []


# --- a cluster that does not answer ----------------------------------------------------------


def test_reading_from_a_silent_cluster_times_out_with_a_clear_message() -> None:
    config = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    with pytest.raises(
        TimeoutError, match=re.escape(f"reading {CONSUMER_TIMESTAMPS_TOPIC} on 127.0.0.1")
    ):
        read_group_timestamps(config, "G", timeout=1.0)
    with pytest.raises(
        TimeoutError, match=re.escape("looking up offsets by timestamp on 127.0.0.1")
    ):
        offsets_for_timestamps(config, {("t", 0): 5}, timeout=1.0)


def test_negative_wanted_timestamp_is_refused() -> None:
    with pytest.raises(ValueError, match=r"timestamp for t \[0\] must be >= 0"):
        offsets_for_timestamps({"bootstrap.servers": "127.0.0.1:1"}, {("t", 0): -1})
