"""A transactional producer stuck in librdkafka is given up, and the task fails in bounded time.

librdkafka can block in send_offsets_to_transaction past its own timeout once the group
coordinator went away; ferry must not wait for it forever, nor touch the producer again.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from ferry.engine.copy import exactly_once, worker_clients
from ferry.engine.copy.types import CopyContext, CopyRange
from ferry.errors import KafkaUnavailableError

CTX = CopyContext("A", "a:1", "ida", "B", "b:1", "idb")
RANGE = CopyRange("orders", 3, 0, 10, "A.orders", 1_000_000)


class StuckProducer:
    """Blocks in send_offsets_to_transaction until released; records every other call."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[str] = []

    def send_offsets_to_transaction(self, *_args: Any) -> None:
        self.release.wait()

    def __getattr__(self, name: str) -> Any:
        return lambda *_a, **_k: self.calls.append(name)


def test_a_producer_that_never_answers_is_abandoned_and_the_task_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exactly_once, "SEND_OFFSETS_TIMEOUT_SECONDS", 0.2)
    monkeypatch.setattr(exactly_once, "SEND_OFFSETS_GRACE_SECONDS", 0.1)
    producer = StuckProducer()
    offsets = [TopicPartition("A.orders", 3, 10)]
    try:
        began = time.monotonic()
        with pytest.raises(KafkaUnavailableError) as caught:
            exactly_once._send_offsets(producer, offsets, object(), [RANGE], CTX)
        assert time.monotonic() - began < 5
        assert caught.value.cluster == "B"
        assert "orders partition 3" in str(caught.value)
        assert worker_clients.abandoned(producer)
        # Never called again: an abort or a close would block behind the stuck call.
        exactly_once._abort_quietly(producer)
        worker_clients.evict_transactional([])
        worker_clients._drop(producer)
        assert producer.calls == []
    finally:
        producer.release.set()


def test_an_answer_in_time_is_passed_through(monkeypatch: pytest.MonkeyPatch) -> None:
    producer = StuckProducer()
    producer.release.set()
    exactly_once._send_offsets(producer, [], object(), [RANGE], CTX)
    assert not worker_clients.abandoned(producer)
