"""ferry's producer raises librdkafka's errors as KafkaException, never as a SystemError."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy.errors import fenced
from ferry.kafka import clients
from ferry.kafka.errors import kafka_error_of


def _masked_fence() -> SystemError:
    """What confluent-kafka 2.16 raises from flush() when a fenced producer's fatal error was
    left pending and the next delivery report was served with it."""
    fence = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    masked = SystemError("<function on_delivery> returned a result with an exception set")
    masked.__cause__ = fence
    return masked


def test_a_fenced_producers_error_masked_as_a_system_error_is_raised_as_itself() -> None:
    with pytest.raises(KafkaException) as raised, clients.unmasked():
        raise _masked_fence()
    error = kafka_error_of(raised.value)
    assert error is not None and fenced(error) and error.fatal()


def test_any_other_system_error_is_left_as_it_is() -> None:
    with pytest.raises(SystemError, match="a bug elsewhere"), clients.unmasked():
        raise SystemError("a bug elsewhere")


def test_every_producer_ferry_makes_unmasks_the_calls_that_serve_callbacks() -> None:
    producer = clients.producer({"bootstrap.servers": "127.0.0.1:1"})
    assert isinstance(producer, clients.Producer)
