"""Controller-bound admin requests asked again, after the metadata is read again, when one
waited for a controller that is down, a bounded number of times (ferry.kafka.controller)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.kafka.controller import ATTEMPTS, ControllerRequests, waited_for_controller

CONTROLLER_DOWN = KafkaException(
    KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for controller: Local: Timed out")
)
NO_RESPONSE = KafkaException(
    KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for response from broker")
)


class FakeAdmin:
    """An admin client whose cached controller is down until a metadata read names a live
    one: the first `dead_draws` reads draw the dead node again; `answers`: whether the
    cluster answers a metadata read."""

    def __init__(self, dead_draws: int = 0, answers: bool = True) -> None:
        self.controller_up = False
        self.dead_draws = dead_draws
        self.answers = answers
        self.asked = 0
        self.metadata_reads = 0

    def list_topics(self, timeout: float) -> dict[str, Any]:
        self.metadata_reads += 1
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        self.controller_up = self.metadata_reads > self.dead_draws
        return {}

    def describe(self) -> str:
        self.asked += 1
        if not self.controller_up:
            raise CONTROLLER_DOWN
        return "acls"


def test_only_a_timeout_before_the_controller_was_reached_counts() -> None:
    assert waited_for_controller(CONTROLLER_DOWN)
    # librdkafka's other wording of it (the request's own timer fired first)
    other = KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller")
    assert waited_for_controller(KafkaException(other))
    assert not waited_for_controller(NO_RESPONSE)  # sent: the broker may have acted on it
    assert not waited_for_controller(TimeoutError())
    refused = KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "waiting for controller")
    assert not waited_for_controller(KafkaException(refused))


def test_a_request_whose_controller_is_down_is_asked_again_after_a_metadata_read() -> None:
    admin = FakeAdmin()
    requests = ControllerRequests(admin, 15.0)

    assert requests.ask(lambda client: client.describe()) == "acls"
    assert (admin.asked, admin.metadata_reads) == (2, 1)
    assert requests.ask(lambda client: client.describe()) == "acls"  # no wait any more
    assert (admin.asked, admin.metadata_reads) == (3, 1)


def test_a_cluster_that_does_not_answer_keeps_the_first_error_and_is_not_asked_again() -> None:
    admin = FakeAdmin(answers=False)
    requests = ControllerRequests(admin, 15.0)

    with pytest.raises(KafkaException) as raised:
        requests.ask(lambda client: client.describe())
    assert raised.value is CONTROLLER_DOWN
    assert admin.asked == 1


def test_a_fresh_read_that_draws_the_dead_node_again_is_read_once_more() -> None:
    admin = FakeAdmin(dead_draws=1)
    requests = ControllerRequests(admin, 15.0)

    assert requests.ask(lambda client: client.describe()) == "acls"
    assert (admin.asked, admin.metadata_reads) == (3, 2)


def test_the_asks_are_bounded() -> None:
    admin = FakeAdmin(dead_draws=100)
    requests = ControllerRequests(admin, 15.0)

    with pytest.raises(KafkaException) as raised:
        requests.ask(lambda client: client.describe())
    assert raised.value is CONTROLLER_DOWN
    assert (admin.asked, admin.metadata_reads) == (ATTEMPTS, ATTEMPTS - 1)  # never a loop


def test_other_errors_are_not_asked_again() -> None:
    admin = FakeAdmin()
    requests = ControllerRequests(admin, 15.0)

    def refused(client: Any) -> None:
        client.asked += 1
        raise NO_RESPONSE

    with pytest.raises(KafkaException) as raised:
        requests.ask(refused)
    assert raised.value is NO_RESPONSE
    assert (admin.asked, admin.metadata_reads) == (1, 0)
