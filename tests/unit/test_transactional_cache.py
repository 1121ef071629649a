"""The worker's cache of started transactional producers: two per task slot, least recently used
closed first, a fresh start replacing (and closing) the cached one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ferry.engine.copy import worker_clients


class FakeProducer:
    def __init__(self, settings: dict[str, str]) -> None:
        self.id = settings["transactional.id"]
        self.closed = False

    def init_transactions(self, _timeout: float) -> None:
        pass

    def purge(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeProducer]]:
    made: list[FakeProducer] = []

    def producer(settings: dict[str, str]) -> Any:
        made.append(FakeProducer(settings))
        return made[-1]

    monkeypatch.setattr(worker_clients.clients, "producer", producer)
    monkeypatch.setattr(worker_clients, "_transactional", type(worker_clients._transactional)())
    yield made


def _start(count: int) -> None:
    for i in range(count):
        worker_clients.transactional_producer({"transactional.id": f"t-{i}"}, fresh=True)


def test_beyond_its_size_the_least_recently_used_are_closed(
    fake_producers: list[FakeProducer],
) -> None:
    _start(200)
    size = worker_clients.MAX_TRANSACTIONAL_PRODUCERS
    assert [p.id for p in fake_producers if p.closed] == [f"t-{i}" for i in range(200 - size)]


def test_a_fresh_start_closes_the_cached_producer_of_that_id(
    fake_producers: list[FakeProducer],
) -> None:
    first = worker_clients.transactional_producer({"transactional.id": "t-0"})
    assert worker_clients.transactional_producer({"transactional.id": "t-0"}) is first
    second = worker_clients.transactional_producer({"transactional.id": "t-0"}, fresh=True)
    assert second is not first
    assert first.closed and not second.closed
