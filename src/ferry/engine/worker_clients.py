"""Kafka clients cached per Python process, so Spark tasks reuse connections across batches.

Spark reuses its Python workers (`spark.python.worker.reuse`), so a module-level cache lives
as long as the worker: the first task of a worker pays for connecting, later ones do not.
"""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Consumer, Producer

from ferry.engine.copier import DeliveryTracker

__all__ = ["consumer_for", "evict", "producer_for"]

_consumers: dict[str, Any] = {}
_producers: dict[str, tuple[Any, DeliveryTracker]] = {}


def _key(settings: dict[str, str]) -> str:
    return json.dumps(settings, sort_keys=True)


def consumer_for(settings: dict[str, str]) -> Any:
    key = _key(settings)
    if key not in _consumers:
        _consumers[key] = Consumer(settings)
    return _consumers[key]


def producer_for(settings: dict[str, str]) -> tuple[Any, DeliveryTracker]:
    key = _key(settings)
    if key not in _producers:
        tracker = DeliveryTracker()
        producer = Producer({**settings, "on_delivery": tracker.on_delivery})
        _producers[key] = (producer, tracker)
    return _producers[key]


def evict(consumer_settings: dict[str, str], producer_settings: dict[str, str]) -> None:
    """Drop clients after a failed task: a producer may be fenced or in a fatal state."""
    consumer = _consumers.pop(_key(consumer_settings), None)
    if consumer is not None:
        consumer.close()
    entry = _producers.pop(_key(producer_settings), None)
    if entry is not None:
        entry[0].purge()
        entry[0].flush(0)
