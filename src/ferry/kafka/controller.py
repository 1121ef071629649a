"""Admin requests librdkafka sends to the cluster's controller (ACLs, topic creation, configs),
asked again with fresh metadata when the broker it took for the controller is down.

librdkafka sends those requests to the broker its last metadata named as controller. A KRaft
broker names a random live broker there, and a node killed a moment ago stays in that draw
until its session with the quorum expires (`broker.session.timeout.ms`, 9 s by default). A
client that drew the dead node waits for it until the request times out ("Failed while
waiting for controller") and never asks the cluster again, though two of three nodes answer
(`engine/plan/topic_ids.py` meets the same with DescribeTopics). `ControllerRequests` then
reads the metadata again, which both tells whether the cluster answers at all and names a
controller again, and asks again: at most `ATTEMPTS` times in all. Once is not always enough:
on a loaded cluster the dead node's session outlives a request's timeout, and the fresh
metadata may draw it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

from ferry.kafka.errors import kafka_error_of

__all__ = ["ControllerRequests", "waited_for_controller"]

T = TypeVar("T")
# Asks in all, each after a fresh metadata read but the first: a dead node drawn three times
# running is unlikely, and each ask waits out the client's timeout.
ATTEMPTS = 3


def waited_for_controller(exc: BaseException) -> bool:
    """The request timed out before librdkafka reached the broker it takes for the
    controller (it never reached the cluster with it)."""
    error = kafka_error_of(exc)
    return (
        error is not None
        and error.code() == KafkaError._TIMED_OUT
        and "waiting for controller" in error.str()
    )


class ControllerRequests:
    """Requests to a cluster's controller through one admin client (`client`)."""

    def __init__(self, client: Any, timeout: float) -> None:
        self.client = client
        self._timeout = timeout

    def ask(self, request: Callable[[Any], T]) -> T:
        """`request(client)`; when it timed out waiting for the controller, again after the
        metadata is read again, if the cluster answers that (else the first error), up to
        `ATTEMPTS` asks in all."""
        first: BaseException | None = None
        for _ in range(ATTEMPTS - 1):
            try:
                return request(self.client)
            except (KafkaException, TimeoutError) as exc:
                if not waited_for_controller(exc):
                    raise
                first = first or exc
            try:
                self.client.list_topics(timeout=self._timeout)
            except KafkaException:
                raise first from None
        return request(self.client)
