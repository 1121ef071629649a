"""Controller-bound admin requests asked once more, after the metadata is read again, when the
first waited for a controller that is down (ferry.kafka.controller)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.kafka.controller import ControllerRequests, waited_for_controller

CONTROLLER_DOWN = KafkaException(
    KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for controller: Local: Timed out")
)
NO_RESPONSE = KafkaException(
    KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for response from broker")
)


class FakeAdmin:
    """An admin client whose cached controller is down until a metadata read names a live
    one (`names_live` of them do); `answers`: whether the cluster answers a metadata read."""

    def __init__(self, names_live: bool = True, answers: bool = True) -> None:
        self.controller_up = False
        self.names_live = names_live
        self.answers = answers
        self.asked = 0
        self.metadata_reads = 0

    def list_topics(self, timeout: float) -> dict[str, Any]:
        self.metadata_reads += 1
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))
        self.controller_up = self.names_live
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


def test_a_second_wait_for_the_controller_is_the_answer() -> None:
    admin = FakeAdmin(names_live=False)
    requests = ControllerRequests(admin, 15.0)

    with pytest.raises(KafkaException) as raised:
        requests.ask(lambda client: client.describe())
    assert raised.value is CONTROLLER_DOWN
    assert (admin.asked, admin.metadata_reads) == (2, 1)  # once more, never a loop


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
