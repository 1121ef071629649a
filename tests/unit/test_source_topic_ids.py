"""Source topic ids when the broker the client asks first has gone down since its last look."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ferry.engine.plan.topic_ids import SourceTopics, describe_source_topics, source_topic_ids


class Description:
    def __init__(self, topic_id: str) -> None:
        self.topic_id = topic_id


class StaleControllerAdmin:
    """librdkafka's admin client as it behaves with a stale controller id: DescribeTopics goes
    to a broker that is down (no answer in time) until a metadata request names a live one."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids
        self.fresh = False
        self.calls: list[str] = []

    def describe_topics(self, topics: Any, request_timeout: float) -> dict[str, Future[Any]]:
        self.calls.append("describe")
        answers: dict[str, Future[Any]] = {}
        for name in topics.topic_names:
            future: Future[Any] = Future()
            if not self.fresh:
                future.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
            elif name in self.ids:
                future.set_result(Description(self.ids[name]))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            answers[name] = future
        return answers

    def list_topics(self, timeout: float) -> None:
        self.calls.append("metadata")
        self.fresh = True


def test_a_describe_that_times_out_is_asked_again_after_the_metadata_is_read() -> None:
    admin = StaleControllerAdmin({"orders": "id-1", "payments": "id-2"})
    ids = source_topic_ids(admin, ["payments", "orders"], timeout=1.0)  # type: ignore[arg-type]
    assert ids == {"orders": "id-1", "payments": "id-2"}
    assert admin.calls == ["describe", "metadata", "describe"]


def test_a_topic_that_is_gone_stays_unknown() -> None:
    admin = StaleControllerAdmin({"orders": "id-1"})
    admin.fresh = True
    ids = source_topic_ids(admin, ["orders", "gone"], timeout=1.0)  # type: ignore[arg-type]
    assert ids == {"orders": "id-1"}


def test_every_topic_described_at_once_needs_no_second_look() -> None:
    admin = StaleControllerAdmin({"orders": "id-1"})
    admin.fresh = True
    assert source_topic_ids(admin, ["orders"], timeout=1.0) == {"orders": "id-1"}  # type: ignore[arg-type]
    assert admin.calls == ["describe"]


def test_a_topic_the_source_says_does_not_exist_is_told_apart_from_one_not_answered() -> None:
    # A lease whose batch names a topic deleted since (Spark replays a planned batch after a
    # restart) drops it instead of waiting for ever for an id that will never come.
    admin = StaleControllerAdmin({"orders": "id-1"})
    admin.fresh = True
    described = describe_source_topics(admin, ["orders", "deleted"], timeout=1.0)  # type: ignore[arg-type]
    assert described == SourceTopics({"orders": "id-1"}, frozenset({"deleted"}))


def test_a_topic_that_got_no_answer_is_not_taken_for_deleted() -> None:
    admin = StaleControllerAdmin({"orders": "id-1"})
    admin.list_topics = lambda timeout: None  # type: ignore[method-assign]  # stays stale
    described = describe_source_topics(admin, ["orders"], timeout=0.2)  # type: ignore[arg-type]
    assert described == SourceTopics({}, frozenset())
