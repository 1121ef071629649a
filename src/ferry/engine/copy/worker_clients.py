"""Kafka clients cached per Python process, so Spark tasks reuse connections across batches.

Spark reuses its Python workers (`spark.python.worker.reuse`), so a module-level cache lives
as long as the worker: the first task of a worker pays for connecting, later ones do not.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from typing import Any

from confluent_kafka import KafkaException

from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.kafka import clients

__all__ = [
    "abandon",
    "abandoned",
    "admin_for",
    "close_mentioning",
    "consumer_for",
    "evict",
    "evict_native",
    "evict_transactional",
    "native_copier_for",
    "producer_for",
    "transactional_producer",
]

_admins: dict[str, Any] = {}
_consumers: dict[str, Any] = {}
_producers: dict[str, tuple[Any, DeliveryTracker]] = {}
_native: dict[str, Any] = {}  # NativeCopier by its consumer and producer settings
# Exactly-once: a started producer per transactional id (a task slot's parity), least recently
# used first. All share one tracker: a worker runs one task at a time.
_transactional: OrderedDict[str, Any] = OrderedDict()
_transactional_lock = threading.Lock()  # a lease starts its two producers in threads
transactional_tracker = DeliveryTracker()
# Two per task slot (transactional.PARITIES): a worker that ran tasks of 64 slots keeps them all.
MAX_TRANSACTIONAL_PRODUCERS = 128
# Producers stuck inside a librdkafka call: never called again, never closed (a close would
# wait for the stuck call), kept referenced so no garbage collection destroys them either.
_abandoned: list[Any] = []
INIT_TIMEOUT_SECONDS = 60.0


def _key(settings: dict[str, str]) -> str:
    return json.dumps(settings, sort_keys=True)


def admin_for(settings: dict[str, str]) -> Any:
    key = _key(settings)
    if key not in _admins:
        _admins[key] = clients.admin_client(settings)
    return _admins[key]


def consumer_for(settings: dict[str, str]) -> Any:
    key = _key(settings)
    if key not in _consumers:
        _consumers[key] = clients.consumer(settings)
    return _consumers[key]


def producer_for(settings: dict[str, str]) -> tuple[Any, DeliveryTracker]:
    key = _key(settings)
    if key not in _producers:
        # No default delivery callback: the copier gives one to the copies that need it (see
        # deliveries), and a report nobody asked for costs a Message object per record.
        tracker = DeliveryTracker()
        producer = clients.producer(settings)
        _producers[key] = (producer, tracker)
    return _producers[key]


def native_copier_for(consumer_settings: dict[str, str], producer_settings: dict[str, str]) -> Any:
    """The C copy loop's clients (native_copier.NativeCopier), started once per worker."""
    from ferry.engine.copy.native_loop import NativeCopier

    key = _key({"consumer": _key(consumer_settings), "producer": _key(producer_settings)})
    if key not in _native:
        _native[key] = NativeCopier(consumer_settings, producer_settings)
    return _native[key]


def evict_native(consumer_settings: dict[str, str], producer_settings: dict[str, str]) -> None:
    """Drop a native copier after a failed copy (its producer may be fenced or purged)."""
    key = _key({"consumer": _key(consumer_settings), "producer": _key(producer_settings)})
    copier = _native.pop(key, None)
    if copier is not None:
        copier.close()


def evict(consumer_settings: dict[str, str], producer_settings: dict[str, str]) -> None:
    """Drop clients after a failed task: a producer may be fenced or in a fatal state."""
    consumer = _consumers.pop(_key(consumer_settings), None)
    if consumer is not None:
        consumer.close()
    entry = _producers.pop(_key(producer_settings), None)
    if entry is not None:
        entry[0].purge()
        entry[0].flush(0)


def transactional_producer(settings: dict[str, str], fresh: bool = False) -> Any:
    """The started transactional producer for `settings["transactional.id"]`.

    Starting one (init_transactions) fences every other producer with the same id and aborts
    the transaction it left open. `fresh` replaces the cached one (it failed or was fenced).
    """
    key = _key(settings)
    with _transactional_lock:
        stale = _transactional.pop(key, None) if fresh else None
        producer = _transactional.get(key)
    _drop(stale)
    if producer is None:
        # quiet: a producer fenced by its successor logs fatal errors, expected here.
        producer = clients.producer(settings)
        try:
            producer.init_transactions(INIT_TIMEOUT_SECONDS)
        except BaseException:
            _drop(producer)
            raise
        with _transactional_lock:
            _transactional[key] = producer
            evicted = [
                _transactional.popitem(last=False)[1]
                for _ in range(len(_transactional) - MAX_TRANSACTIONAL_PRODUCERS)
            ]
        for old in evicted:
            _drop(old)
    with _transactional_lock:
        if key in _transactional:
            _transactional.move_to_end(key)
    return producer


def abandon(producer: Any) -> None:
    """Give up a transactional producer stuck in a call: out of the cache, left untouched.

    Its successor (same transactional id) fences it; the thread blocked in it is leaked."""
    with _transactional_lock:
        for key, cached in list(_transactional.items()):
            if cached is producer:
                del _transactional[key]
        _abandoned.append(producer)


def abandoned(producer: Any) -> bool:
    return any(p is producer for p in _abandoned)


def evict_transactional(settings: list[dict[str, str]]) -> None:
    with _transactional_lock:
        dropped = [_transactional.pop(_key(s), None) for s in settings]
    for producer in dropped:
        _drop(producer)


def _drop(producer: Any) -> None:
    if producer is None or abandoned(producer):
        return
    # A fenced or failed producer raises its fatal error from every call, close() included.
    with contextlib.suppress(KafkaException):
        producer.purge()
    with contextlib.suppress(KafkaException):
        producer.close()


def close_mentioning(text: str) -> None:
    """Close the cached clients whose settings mention `text` (say, a `client.id`): the
    clients of a copy that is over in a process that goes on (the driver after its head
    start). Copies still unacknowledged are dropped, so call it only after the copy loop
    waited for its acknowledgements."""
    with _transactional_lock:
        transactional = [_transactional.pop(k) for k in list(_transactional) if text in k]
    for producer in transactional:
        _drop(producer)
    for key in [k for k in _native if text in k]:
        _native.pop(key).close()
    for key in [k for k in _consumers if text in k]:
        _consumers.pop(key).close()
    for key in [k for k in _producers if text in k]:
        _producers.pop(key)[0].flush(0)
