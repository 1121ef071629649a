"""The worker's cache of started transactional producers never closes one a task holds."""

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
    monkeypatch.setattr(worker_clients, "_capacity", worker_clients.MAX_TRANSACTIONAL_PRODUCERS)
    yield made


def _start(count: int) -> None:
    for i in range(count):
        worker_clients.transactional_producer({"transactional.id": f"t-{i}"}, fresh=True)


def test_a_bin_bigger_than_the_cache_keeps_every_producer_it_started(
    fake_producers: list[FakeProducer],
) -> None:
    # 100 partitions, two producers each: more than the cache's default of 128.
    worker_clients.make_room(200)
    _start(200)
    assert len(fake_producers) == 200
    assert not [p.id for p in fake_producers if p.closed]


def test_without_room_the_least_recently_used_are_closed(
    fake_producers: list[FakeProducer],
) -> None:
    _start(200)
    assert [p.id for p in fake_producers if p.closed] == [f"t-{i}" for i in range(72)]


def test_room_is_never_made_smaller(fake_producers: list[FakeProducer]) -> None:
    worker_clients.make_room(200)
    worker_clients.make_room(10)
    _start(150)
    assert not any(p.closed for p in fake_producers)
