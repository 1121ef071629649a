"""An exactly-once lease's slices: one transaction per slice for all the task's partitions,
the two producers alternating, and a producer never begun again while its previous slice's
commit still runs (an idle slice in between included)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy import exactly_once
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.lease import LeaseTerms
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult, Slice
from ferry.errors import KafkaUnavailableError, error_from_text, error_to_text

CTX = CopyContext("A", "a:1", "ida", "B", "b:1", "idb")
RANGES = [CopyRange("orders", p, 0, 100, "A.orders", 1_000_000) for p in range(3)]


class SlowCommitProducer:
    """Its commit's send_offsets takes a while; begin_transaction while its transaction has
    not ended (its commit not through) is what librdkafka refuses (_CONFLICT, _STATE),
    recorded here."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log
        self.open = threading.Event()
        self.conflicts = 0

    def begin_transaction(self) -> None:
        if self.open.is_set():
            self.conflicts += 1
        self.open.set()
        self.log.append(f"{self.name} begin")

    def send_offsets_to_transaction(self, offsets: list[Any], _group: Any, _t: float) -> None:
        self.log.append(f"{self.name} offsets {len(offsets)}")
        time.sleep(0.15)

    def commit_transaction(self, _timeout: float) -> None:
        self.log.append(f"{self.name} commit")
        self.open.clear()

    def produce(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def abort_transaction(self, _timeout: float) -> None:
        self.log.append(f"{self.name} abort")
        self.open.clear()


class Progress:
    def consumer_group_metadata(self) -> object:
        return object()


def run_lease(
    producers: list[SlowCommitProducer], terms: LeaseTerms
) -> tuple[list[PartitionResult], list[str]]:
    """An exactly-once lease of RANGES whose task's two producers are `producers`."""
    return exactly_once.run_lease_exactly_once(
        object(),
        Progress(),
        lambda fresh, parity=0: producers[parity],
        DeliveryTracker(),
        RANGES,
        CTX,
        "runs",
        terms,
        {},
    )


def test_one_transaction_per_slice_and_no_begin_during_the_commit_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    producers = [SlowCommitProducer(f"p{parity}", log) for parity in (0, 1)]
    slices = 0

    def copy_ranges(
        _consumer: Any,
        mapping: dict[tuple[str, int], Any],
        _tracker: Any,
        work: list[CopyRange],
        _ctx: Any,
        _slice: Slice,
    ) -> list[PartitionResult]:
        nonlocal slices
        slices += 1
        assert len({id(p) for p in mapping.values()}) == 1, "one producer for the whole task"
        moved = 0 if slices % 2 == 0 else 10  # every other slice idle
        return [
            PartitionResult(r.topic, r.partition, r.start, r.start + moved, copied=moved)
            for r in work
        ]

    monkeypatch.setattr(exactly_once, "copy_ranges", copy_ranges)
    monkeypatch.setattr(exactly_once, "verified_progress", lambda *_a: {})
    stop_after = time.monotonic() + 1.5
    terms = LeaseTerms(30.0, 0.01, stop_requested=lambda: time.monotonic() > stop_after)

    results, notices = run_lease(producers, terms)

    assert not notices
    assert slices >= 4
    assert [p.conflicts for p in producers] == [0, 0], log
    # The slices that moved sent the positions of all three partitions in one call.
    assert {line.split()[-1] for line in log if " offsets " in line} == {"3"}
    assert all(r.end > 0 for r in results)


class FencedProducer(SlowCommitProducer):
    """Fenced by a newer producer of its id after its first slice: from then on librdkafka
    raises the fatal error from every call, begin_transaction included."""

    def begin_transaction(self) -> None:
        if any(line.endswith("commit") for line in self.log):
            raise KafkaException(
                KafkaError(KafkaError._FENCED, "This instance has been fenced", fatal=True)
            )
        super().begin_transaction()


def test_a_producer_fenced_mid_lease_fails_the_lease_with_an_error_ferry_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A raw librdkafka exception would reach `ferry run` with no ferry error in it, and the
    run would stop for good; a run that woke after another took over must retry instead."""
    log: list[str] = []
    producers = [FencedProducer(f"p{parity}", log) for parity in (0, 1)]

    def copy_ranges(*args: Any) -> list[PartitionResult]:
        work: list[CopyRange] = args[3]
        return [PartitionResult(r.topic, r.partition, r.start, r.start + 5) for r in work]

    monkeypatch.setattr(exactly_once, "copy_ranges", copy_ranges)
    monkeypatch.setattr(exactly_once, "verified_progress", lambda *_a: {})
    terms = LeaseTerms(30.0, 0.01)

    with pytest.raises(KafkaUnavailableError) as raised:
        run_lease(producers, terms)

    error = raised.value
    assert error.cluster == "B"
    assert "fenced" in error.what
    assert "another ferry run of this flow" in str(error)
    assert "3 partitions (orders partition 0" in str(error)
    # What Spark's failure text carries back to the driver is the same retried error.
    assert isinstance(
        error_from_text(f"Job aborted: {error_to_text(error)}"), KafkaUnavailableError
    )
