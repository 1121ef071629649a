"""Partition offsets through ListOffsets, in batches the brokers answer well in time, read
back by (topic, partition)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import IsolationLevel

from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST
from ferry.kafka.partition_offsets import read_offsets


class _Answer:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class FakeAdmin:
    """Answers each partition's offset as 10 x its partition number; keeps each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, Any]] = []

    def list_offsets(
        self, request: dict[Any, Any], isolation_level: Any, request_timeout: float
    ) -> dict[Any, Future[Any]]:
        self.requests.append((len(request), isolation_level))
        futures = {}
        for tp in request:
            future: Future[Any] = Future()
            future.set_result(_Answer(tp.partition * 10))
            futures[tp] = future
        return futures


def test_twelve_thousand_partitions_go_in_three_requests_and_come_back_by_partition() -> None:
    admin = FakeAdmin()
    partitions = [(f"t{i // 100}", i % 100) for i in range(12_000)]
    ends = read_offsets(admin, partitions, timeout=5)
    assert [n for n, _ in admin.requests] == [
        MAX_OFFSETS_PARTITIONS_PER_REQUEST,
        MAX_OFFSETS_PARTITIONS_PER_REQUEST,
        12_000 - 2 * MAX_OFFSETS_PARTITIONS_PER_REQUEST,
    ]
    assert all(level == IsolationLevel.READ_COMMITTED for _, level in admin.requests)
    assert len(ends) == 12_000 and ends[("t7", 42)] == 420


def test_an_answer_that_gives_none_leaves_the_partition_out_and_nothing_asks_nothing() -> None:
    admin = FakeAdmin()
    ends = read_offsets(
        admin,
        [("a", 1), ("a", 2)],
        committed_only=False,
        timeout=5,
        answer=lambda tp, f: None if tp.partition == 1 else int(f.result().offset),
    )
    assert ends == {("a", 2): 20}
    assert admin.requests == [(2, IsolationLevel.READ_UNCOMMITTED)]
    assert read_offsets(FakeAdmin(), [], timeout=5) == {}
