"""Every Kafka client ferry creates, made here: librdkafka's log goes to Python logging.

A client that cannot reach a broker logs a line per connection attempt (several a second);
printed raw, hundreds of them bury the one precise error ferry reports. Built here, each
client's lines go to the `ferry.librdkafka` logger instead (see `log`), and what the console
says about a cluster is ferry's own sentence, once per change (see `reachability`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from ferry.kafka.log import quiet

__all__ = ["Producer", "admin_client", "consumer", "producer", "unmasked"]


def admin_client(settings: Mapping[str, Any]) -> AdminClient:
    return AdminClient(quiet(settings))


def consumer(settings: Mapping[str, Any]) -> Consumer:
    return Consumer(quiet(settings))


def producer(settings: Mapping[str, Any]) -> Producer:
    return Producer(quiet(settings))


@contextmanager
def unmasked() -> Iterator[None]:
    """A librdkafka error that confluent-kafka let Python report as a SystemError, raised as
    the KafkaException it is.

    When librdkafka reports a fatal error (a transactional producer fenced by a newer one)
    while a call serves callbacks, confluent-kafka (2.16) raises the KafkaException in its error
    callback but leaves it pending, and the call (flush above all: it serves again after the
    error) goes on to the next callback, a delivery report or a log line. Python then fails
    that callback with `SystemError: ... returned a result with an exception set`, the
    KafkaException as its cause. Every caller that knows what a fenced producer means catches
    KafkaException; a SystemError got past them all and stopped `ferry run`."""
    try:
        yield
    except SystemError as exc:
        if isinstance(exc.__cause__, KafkaException):
            raise exc.__cause__ from None
        raise


class Producer(confluent_kafka.Producer):
    """confluent-kafka's producer whose calls that serve callbacks raise librdkafka's errors
    as KafkaException, never as a SystemError (see `unmasked`)."""

    def poll(self, *args: Any, **kwargs: Any) -> int:
        with unmasked():
            return super().poll(*args, **kwargs)

    def flush(self, *args: Any, **kwargs: Any) -> int:
        with unmasked():
            return super().flush(*args, **kwargs)

    def commit_transaction(self, *args: Any, **kwargs: Any) -> None:
        with unmasked():
            super().commit_transaction(*args, **kwargs)

    def abort_transaction(self, *args: Any, **kwargs: Any) -> None:
        with unmasked():
            super().abort_transaction(*args, **kwargs)

    def close(self, *args: Any, **kwargs: Any) -> Any:
        with unmasked():
            return super().close(*args, **kwargs)
