"""Every Kafka client ferry creates, made here: librdkafka's log goes to Python logging.

A client that cannot reach a broker logs a line per connection attempt (several a second);
printed raw, hundreds of them bury the one precise error ferry reports. Built here, each
client's lines go to the `ferry.librdkafka` logger instead (see `log`), and what the console
says about a cluster is ferry's own sentence, once per change (see `reachability`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from ferry.kafka.log import quiet

__all__ = ["admin_client", "consumer", "producer"]


def admin_client(settings: Mapping[str, Any]) -> AdminClient:
    return AdminClient(quiet(settings))


def consumer(settings: Mapping[str, Any]) -> Consumer:
    return Consumer(quiet(settings))


def producer(settings: Mapping[str, Any]) -> Producer:
    return Producer(quiet(settings))
