"""`kafka_errors`: one mapping from librdkafka's errors to ferry's, with real KafkaErrors."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import KafkaUnavailableError, RefusedError, ReplicationError
from ferry.kafka.errors import (
    REFUSAL_CODES,
    UNREACHABLE_CODES,
    Endpoint,
    ferry_error,
    kafka_errors,
)

A = ClusterConfig(alias="A", bootstrap_servers="a:9092")


def _raise(code: int, text: str = "the broker's words") -> None:
    raise KafkaException(KafkaError(code, text))


@pytest.mark.parametrize("code", sorted(UNREACHABLE_CODES))
def test_no_answer_is_unavailable_with_the_code_and_text(code: int) -> None:
    with pytest.raises(KafkaUnavailableError) as caught, kafka_errors(A, "list topics"):
        _raise(code)
    error = caught.value
    assert (error.cluster, error.bootstrap) == ("A", "a:9092")
    name = KafkaError(code).name()
    assert str(error) == (
        f"cluster A (a:9092) is unreachable: could not list topics: {name}: the broker's words"
    )
    assert isinstance(error.__cause__, KafkaException)
    assert error.__cause__.args[0].code() == code


def test_without_an_action_the_message_is_the_code_and_text() -> None:
    with pytest.raises(KafkaUnavailableError) as caught, kafka_errors(A):
        _raise(KafkaError._TRANSPORT, "Connection refused")
    assert str(caught.value) == "cluster A (a:9092) is unreachable: _TRANSPORT: Connection refused"


def test_a_future_with_no_answer_in_time_is_unavailable_not_a_crash() -> None:
    from concurrent.futures import Future

    never: Future[None] = Future()
    with pytest.raises(KafkaUnavailableError) as caught, kafka_errors(A, "create topic"):
        never.result(0.01)
    assert str(caught.value) == (
        "cluster A (a:9092) is unreachable: could not create topic: no answer in time"
    )
    assert isinstance(caught.value.__cause__, TimeoutError)


def test_a_refusal_without_a_fix_is_a_refusal_naming_the_acl_route_not_an_outage() -> None:
    with (
        pytest.raises(RefusedError) as caught,
        kafka_errors(A, "read group offsets", topic="orders"),
    ):
        _raise(KafkaError.GROUP_AUTHORIZATION_FAILED, "Not authorized")
    error = caught.value
    assert not isinstance(error, KafkaUnavailableError)  # never retried as an outage
    assert (error.cluster, error.bootstrap) == ("A", "a:9092")
    assert str(error).startswith(
        "cluster A (a:9092) refused: topic orders, could not read group offsets: "
        "GROUP_AUTHORIZATION_FAILED: Not authorized. Fix: grant ferry's principal on A the "
        "ACL it needs to read group offsets; `ferry doctor -c CONFIG` names each ACL"
    )


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (KafkaError.SASL_AUTHENTICATION_FAILED, "check A's security settings"),
        (KafkaError._AUTHENTICATION, "did not accept ferry's credentials"),
        (KafkaError.POLICY_VIOLATION, "a policy of A refused it"),
        (KafkaError.INVALID_CONFIG, "the brokers of A refused the request as it is"),
    ],
)
def test_credentials_policies_and_invalid_requests_are_refusals(code: int, says: str) -> None:
    with pytest.raises(RefusedError) as caught, kafka_errors(A, "alter configs"):
        _raise(code)
    assert says in caught.value.fix


def test_every_refusal_code_is_neither_unreachable_nor_retriable() -> None:
    assert not REFUSAL_CODES & UNREACHABLE_CODES
    for code in REFUSAL_CODES:
        assert not KafkaError(code).retriable(), KafkaError(code).name()


def test_a_busy_or_moving_cluster_stays_an_outage() -> None:
    for code in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_ENOUGH_REPLICAS):
        with pytest.raises(KafkaUnavailableError), kafka_errors(A, "commit"):
            _raise(code)


def test_a_refusal_with_a_fix_is_a_replication_error_at_the_topic_and_partition() -> None:
    fix = "grant ferry's principal DESCRIBE_CONFIGS"
    with (
        pytest.raises(ReplicationError) as caught,
        kafka_errors(A, "read its configs", topic="orders", partition=3, fix=fix),
    ):
        _raise(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Not authorized")
    error = caught.value
    assert (error.cluster, error.topic, error.partition, error.fix) == ("A", "orders", 3, fix)
    assert str(error) == (
        "cluster A, topic orders, partition 3: could not read its configs: "
        "TOPIC_AUTHORIZATION_FAILED: Not authorized. Fix: grant ferry's principal DESCRIBE_CONFIGS"
    )
    assert error.__cause__ is not None


def test_a_fix_may_depend_on_the_code() -> None:
    def fix(error: KafkaError) -> str:
        return f"fix for {error.name()}"

    with (
        pytest.raises(ReplicationError) as caught,
        kafka_errors(A, "create topic", topic="t", fix=fix),
    ):
        _raise(KafkaError.POLICY_VIOLATION)
    assert caught.value.fix == "fix for POLICY_VIOLATION"


def test_a_fix_does_not_make_no_answer_a_replication_error() -> None:
    with (
        pytest.raises(KafkaUnavailableError),
        kafka_errors(A, "create topic", topic="t", fix="never shown"),
    ):
        _raise(KafkaError._TIMED_OUT)


def test_a_done_code_ends_the_block_quietly() -> None:
    reached = []
    with kafka_errors(A, "create topic", done={KafkaError.TOPIC_ALREADY_EXISTS}):
        _raise(KafkaError.TOPIC_ALREADY_EXISTS)
        reached.append("after")  # pragma: no cover
    assert reached == []


def test_other_codes_are_not_done() -> None:
    with (
        pytest.raises(KafkaUnavailableError),
        kafka_errors(A, done={KafkaError.TOPIC_ALREADY_EXISTS}),
    ):
        _raise(KafkaError._ALL_BROKERS_DOWN)


def test_an_exception_without_a_kafka_error_is_unavailable_with_its_text() -> None:
    with pytest.raises(KafkaUnavailableError) as caught, kafka_errors(A, "list topics"):
        raise KafkaException("no error object")
    assert str(caught.value).endswith("could not list topics: no error object")


def test_other_exceptions_pass_through() -> None:
    with pytest.raises(ValueError, match="not Kafka's"), kafka_errors(A):
        raise ValueError("not Kafka's")


def test_an_endpoint_names_a_cluster_without_its_config() -> None:
    source = Endpoint("B", "b:9092")
    with (
        pytest.raises(KafkaUnavailableError) as caught,
        kafka_errors(source, "read the end of orders partition 0"),
    ):
        _raise(KafkaError._TRANSPORT)
    assert str(caught.value).startswith(
        "cluster B (b:9092) is unreachable: could not read the end of orders partition 0: "
    )


def test_ferry_error_is_what_the_block_raises() -> None:
    exc = KafkaException(KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, "too many"))
    error = ferry_error(A, exc, "create topic", topic="t", fix="fewer replicas")
    assert isinstance(error, ReplicationError)
    assert str(error) == (
        "cluster A, topic t: could not create topic: INVALID_REPLICATION_FACTOR: too many. "
        "Fix: fewer replicas"
    )


def test_a_fix_without_a_topic_is_a_mistake_of_the_caller() -> None:
    with pytest.raises(ValueError, match="needs the topic"), kafka_errors(A, "x", fix="y"):
        _raise(KafkaError.TOPIC_AUTHORIZATION_FAILED)
