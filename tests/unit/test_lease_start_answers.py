"""Where a lease starts reads two answers: the flow's committed progress on the target, and
the source's end. A partition either answers with an error is an error, never "no position"
or "an end below the position" (either would copy the partition again from its start)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy.exactly_once import (
    committed_positions,
    committed_progress,
    verified_progress,
)
from ferry.engine.copy.lease import start_positions
from ferry.engine.copy.source_ends import high_watermarks
from ferry.engine.copy.types import CopyContext, CopyRange
from ferry.errors import KafkaUnavailableError

CTX = CopyContext("A", "a:9092", "source-id", "B", "b:9092", "target-id")
WORK = [CopyRange("orders", p, 0, 100, "A.orders", 1_048_588) for p in (0, 1)]


@dataclass
class Answer:  # what librdkafka's committed() gives per partition
    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None
    metadata: str | None = None


class Progress:
    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers

    def committed(self, _request: Any, timeout: float) -> list[Answer]:
        return self.answers


def test_positions_by_remote_partition_and_none_yet_as_is() -> None:
    progress = Progress([Answer("A.orders", 0, 42), Answer("A.orders", 1, -1001)])
    assert committed_positions(progress, WORK, CTX) == {("A.orders", 0): 42, ("A.orders", 1): -1001}


def test_the_topic_id_committed_beside_a_position_is_read_with_it() -> None:
    progress = Progress(
        [Answer("A.orders", 0, 42, metadata="topic-id=abc"), Answer("A.orders", 1, 7, metadata="")]
    )
    assert committed_progress(progress, WORK, CTX) == {
        ("A.orders", 0): (42, "abc"),
        ("A.orders", 1): (7, ""),
    }


def test_a_position_in_a_known_topic_is_not_resumed_while_the_topic_id_now_is_not_known() -> None:
    ranges = [
        CopyRange("orders", 0, 0, 100, "A.orders", 1_048_588, "abc"),
        CopyRange("orders", 1, 0, 100, "A.orders", 1_048_588),  # the source did not say
    ]
    progress = Progress(
        [
            Answer("A.orders", 0, 42, metadata="topic-id=abc"),
            Answer("A.orders", 1, 7, metadata="topic-id=abc"),
        ]
    )
    with pytest.raises(KafkaUnavailableError) as raised:
        verified_progress(progress, ranges, CTX)
    assert "topic orders" in str(raised.value) and "partition 1" in str(raised.value)
    # Committed without an id (an older ferry, by hand): nothing to verify, resumed.
    progress = Progress(
        [Answer("A.orders", 0, 42, metadata="topic-id=abc"), Answer("A.orders", 1, 7)]
    )
    assert verified_progress(progress, ranges, CTX)[("A.orders", 1)] == (7, "")


def test_a_partition_answered_with_an_error_names_it_and_fails() -> None:
    error = KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    progress = Progress([Answer("A.orders", 0, 42), Answer("A.orders", 1, -1001, error)])
    with pytest.raises(KafkaUnavailableError) as raised:
        committed_positions(progress, WORK, CTX)
    assert "A.orders partition 1" in str(raised.value)
    assert "COORDINATOR_LOAD_IN_PROGRESS" in str(raised.value)


class Source:
    def __init__(self, high: int | None) -> None:
        self.high = high

    def get_watermark_offsets(
        self, _tp: Any, timeout: float, cached: bool
    ) -> tuple[int, int] | None:
        assert cached is False  # the leader's answer now, not librdkafka's cache
        return None if self.high is None else (0, self.high)  # None: timed out


def test_a_source_end_is_the_leaders_high_watermark() -> None:
    assert high_watermarks(Source(500), [("orders", 3)], CTX) == {("orders", 3): 500}


@pytest.mark.parametrize("high", [-1001, None])
def test_an_end_without_an_offset_fails_instead_of_reading_as_recreated(high: int | None) -> None:
    with pytest.raises(KafkaUnavailableError) as raised:
        high_watermarks(Source(high), [("orders", 3)], CTX)
    assert "orders partition 3" in str(raised.value)


class Deleted:
    """A source whose `gone` topic no longer exists (deleted after the lease was planned);
    other partitions answer, or fail with `other`."""

    def __init__(self, code: int, other: int | None = None) -> None:
        self.code, self.other = code, other

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        if tp.topic == "gone":
            raise KafkaException(KafkaError(self.code))
        if self.other is not None:
            raise KafkaException(KafkaError(self.other))
        return (0, 700)


@pytest.mark.parametrize(
    "code",
    [KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART],
)
def test_a_partition_the_source_no_longer_has_is_left_out_and_its_position_kept(
    code: int,
) -> None:
    """A lease replayed after its topic was deleted: asking again would get the same answer
    for ever, so the lease must not fail on it (it did, and its flow copied nothing more)."""
    partitions = [("gone", 0), ("orders", 1)]
    assert high_watermarks(Deleted(code), partitions, CTX) == {("orders", 1): 700}
    ranges = [
        CopyRange("gone", 0, 0, 100, "A.gone", 1_048_588),
        CopyRange("orders", 1, 0, 100, "A.orders", 1_048_588),
    ]
    positions, notices = start_positions(
        ranges,
        {("A.gone", 0): (150, ""), ("A.orders", 1): (120, "")},  # both past the planned ends
        {("gone", 0): 100, ("orders", 1): 100},
        lambda tps: high_watermarks(Deleted(code), tps, CTX),
    )
    assert positions == {("gone", 0): 150, ("orders", 1): 120} and notices == []


def test_a_source_that_does_not_answer_still_fails_the_lease() -> None:
    with pytest.raises(KafkaUnavailableError) as raised:
        high_watermarks(
            Deleted(KafkaError._UNKNOWN_PARTITION, other=KafkaError._TRANSPORT),
            [("orders", 1)],
            CTX,
        )
    assert "read the end of orders partition 1" in str(raised.value)
