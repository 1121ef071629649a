"""The copy producers' message timeouts (engine/copy/client_settings.py).

At-least-once never times a copy out: a copy librdkafka gave up on leaves a gap that later
copies of its partition fill first, and its retry would land out of order. A transactional
producer keeps a timeout within its transaction's, which aborts and retries instead.
"""

from __future__ import annotations

from ferry.config.model import ClusterConfig
from ferry.engine.copy.client_settings import producer_settings, transactional_settings


def _target(**producer: str) -> ClusterConfig:
    return ClusterConfig(
        alias="B",
        bootstrap_servers="b:9092",
        producer={k.replace("_", "."): v for k, v in producer.items()},
    )


def test_at_least_once_copies_never_time_out_by_default() -> None:
    assert producer_settings(_target())["message.timeout.ms"] == "0"


def test_a_message_timeout_the_user_sets_is_kept() -> None:
    assert producer_settings(_target(message_timeout_ms="30000"))["message.timeout.ms"] == "30000"


def test_a_transactional_producer_times_out_within_its_transaction() -> None:
    settings = transactional_settings(producer_settings(_target()), "ferry:A->B:task/0", 60_000)

    assert settings["transactional.id"] == "ferry:A->B:task/0"
    assert settings["transaction.timeout.ms"] == "60000"
    assert settings["message.timeout.ms"] == "60000"  # never (0) becomes the transaction's


def test_a_transactional_producer_keeps_a_shorter_timeout_and_caps_a_longer_one() -> None:
    shorter = transactional_settings({"message.timeout.ms": "5000"}, "t", 60_000)
    longer = transactional_settings({"message.timeout.ms": "300000"}, "t", 60_000)

    assert shorter["message.timeout.ms"] == "5000"
    assert longer["message.timeout.ms"] == "60000"
