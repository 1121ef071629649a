"""Reconcile reads the bounds of partitions it may have just created (a quarantine topic): a
partition whose leader is not elected yet is asked again, a lasting error is still named."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import KafkaUnavailableError
from ferry.ops.reconcile import log_bounds

CLUSTER = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:1")


class Offset:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class Future:
    def __init__(self, offset: int, error: int | None) -> None:
        self._offset, self._error = offset, error

    def result(self) -> Offset:
        if self._error is not None:
            raise KafkaException(KafkaError(self._error))
        return Offset(self._offset)


class LeaderlessAtFirst:
    """Answers NOT_LEADER_FOR_PARTITION `failures` times, then the offsets."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def list_offsets(self, wanted: dict[Any, Any], **_: Any) -> dict[Any, Future]:
        self.calls += 1
        error = KafkaError.NOT_LEADER_FOR_PARTITION if self.failures > 0 else None
        self.failures -= 1
        return {tp: Future(5 * self.calls, error) for tp in wanted}


def test_a_partition_without_a_leader_yet_is_asked_again() -> None:
    admin = LeaderlessAtFirst(failures=2)
    bounds = log_bounds(CLUSTER, admin, [("quarantine", 0)], timeout=10.0)
    assert set(bounds) == {("quarantine", 0)}
    assert admin.calls == 4  # two refused, then the low and the high bound


def test_a_partition_that_never_gets_a_leader_is_named_after_the_timeout() -> None:
    admin = LeaderlessAtFirst(failures=10_000)
    with pytest.raises(KafkaUnavailableError, match="quarantine partition 0"):
        log_bounds(CLUSTER, admin, [("quarantine", 0)], timeout=1.0)
