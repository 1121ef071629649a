"""A consumer's committed offsets asked in batches (kafka/group_offsets.py): one call for 10,000
partitions costs the client the square of them in CPU."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.kafka.admin_batches import MAX_PARTITIONS_PER_COMMITTED_READ
from ferry.kafka.group_offsets import committed_in_batches


class FakeConsumer:
    """Answers each partition with its number as the offset; records each call's size and
    timeout; refuses the call that asks `refuse`."""

    def __init__(self, refuse: int | None = None) -> None:
        self.calls: list[tuple[int, float]] = []
        self.refuse = refuse

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.calls.append((len(partitions), timeout))
        if self.refuse is not None and any(tp.partition == self.refuse for tp in partitions):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer"))
        return [TopicPartition(tp.topic, tp.partition, tp.partition) for tp in partitions]


def request(count: int) -> list[TopicPartition]:
    return [TopicPartition(f"orders-{p // 100:03d}", p) for p in range(count)]


def test_ten_thousand_partitions_are_asked_in_small_calls_and_answered_in_order() -> None:
    consumer = FakeConsumer()
    answer = committed_in_batches(consumer, request(10_000), timeout=30)
    assert [(tp.topic, tp.partition, tp.offset) for tp in answer] == [
        (f"orders-{p // 100:03d}", p, p) for p in range(10_000)
    ]
    assert len(consumer.calls) == 10_000 // MAX_PARTITIONS_PER_COMMITTED_READ
    assert all(size == MAX_PARTITIONS_PER_COMMITTED_READ for size, _ in consumer.calls)
    # One deadline for every call: none is given more than what is left of the whole.
    timeouts = [timeout for _, timeout in consumer.calls]
    assert timeouts[0] <= 30 and timeouts == sorted(timeouts, reverse=True)


def test_a_few_partitions_are_one_call_and_none_no_call() -> None:
    consumer = FakeConsumer()
    assert len(committed_in_batches(consumer, request(3), timeout=10)) == 3
    assert committed_in_batches(consumer, [], timeout=10) == []
    assert [size for size, _ in consumer.calls] == [3]


def test_a_call_that_fails_fails_the_read() -> None:
    consumer = FakeConsumer(refuse=MAX_PARTITIONS_PER_COMMITTED_READ + 1)
    with pytest.raises(KafkaException):
        committed_in_batches(consumer, request(2_000), timeout=10)
    assert len(consumer.calls) == 2  # never read as "no offset" for the rest
