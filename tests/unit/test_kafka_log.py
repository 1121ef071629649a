"""librdkafka's lines: all kept under `ferry.librdkafka`, one line per cluster state change."""

from __future__ import annotations

import logging

import pytest

from ferry.errors import KafkaUnavailableError
from ferry.kafka.log import name_clusters, quiet
from ferry.kafka.reachability import Reachability

REFUSED = (
    "sasl_plaintext://127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
    "Connection refused (after 0ms in state CONNECT)"
)


def _librdkafka_says(logger: object, level: int, facility: str, line: str) -> None:
    # What confluent-kafka calls for each librdkafka line when a client has a `logger`.
    logger.log(level, "%s [%s] %s", facility, "rdkafka#consumer-1", line)  # type: ignore[attr-defined]


def test_a_cluster_down_for_many_attempts_is_one_line_and_one_more_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name_clusters({"Z": "127.0.0.1:1"})
    consumer_log = quiet({"bootstrap.servers": "127.0.0.1:1"})["logger"]
    producer_log = quiet({"bootstrap.servers": "127.0.0.1:1"})["logger"]
    reach = Reachability()
    raw_logger = logging.getLogger("ferry.librdkafka")  # does not propagate: listen to it
    raw_logger.addHandler(caplog.handler)
    with caplog.at_level(logging.DEBUG):
        for _ in range(50):
            _librdkafka_says(consumer_log, logging.ERROR, "FAIL", REFUSED)
            _librdkafka_says(producer_log, logging.ERROR, "FAIL", REFUSED)
        _librdkafka_says(consumer_log, logging.ERROR, "ERROR", "1/1 brokers are down")
        reach.failed(KafkaUnavailableError("Z", "127.0.0.1:1", "no answer"))
        reach.answered("Z")
        reach.answered("Z")
        _librdkafka_says(consumer_log, logging.WARNING, "FAIL", REFUSED)  # down once more
    raw_logger.removeHandler(caplog.handler)

    summary = [r.getMessage() for r in caplog.records if r.name == "ferry.kafka"]
    assert summary == [
        "cluster Z unreachable, retrying",
        "cluster Z reachable again",
        "cluster Z unreachable, retrying",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "ferry.kafka")
    # librdkafka's own lines are all there for whoever listens to ferry.librdkafka.
    raw = [r for r in caplog.records if r.name == "ferry.librdkafka"]
    assert len(raw) == 102 and REFUSED in raw[0].getMessage()


def test_a_line_that_is_not_about_reaching_the_cluster_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = quiet({"bootstrap.servers": "127.0.0.1:2"})["logger"]
    with caplog.at_level(logging.DEBUG):
        _librdkafka_says(logger, logging.WARNING, "CONFWARN", "Configuration property x is ignored")
        # A broker closing an idle connection is no outage.
        _librdkafka_says(
            logger,
            logging.INFO,
            "FAIL",
            "127.0.0.1:2/1: Disconnected (after 600012ms in state UP, 1 identical error(s) "
            "suppressed)",
        )
    assert not [r for r in caplog.records if r.name == "ferry.kafka"]
