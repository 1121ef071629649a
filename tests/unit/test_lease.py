"""A lease's order of things: where it starts, how slices follow each other, when it commits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ferry.config.model import ClusterConfig
from ferry.engine.copy.lease import (
    LeaseTerms,
    run_lease,
    start_positions,
    with_source_ids,
)
from ferry.engine.copy.progress import LeaseCommitter
from ferry.engine.copy.types import EARLIEST, OPEN, CopyRange, PartitionResult, Slice
from ferry.errors import ReplicationError
from ferry.kafka.offset_runs import OffsetRun

RANGES = [CopyRange("orders", 0, EARLIEST, OPEN, "A.orders", 1_000_000)]


def _never_asked(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    raise AssertionError(f"the source's ends were asked for {partitions}")


def test_a_lease_starts_at_the_committed_position_or_the_earliest_record() -> None:
    ranges = [*RANGES, CopyRange("orders", 1, EARLIEST, OPEN, "A.orders", 1_000_000)]
    positions, notices = start_positions(
        ranges, {("A.orders", 0): (42, "")}, {("orders", 0): 50}, _never_asked
    )
    assert positions == {("orders", 0): 42, ("orders", 1): EARLIEST}
    assert notices == []


def test_a_position_beyond_the_source_end_now_means_a_recreated_topic_copied_from_its_start() -> (
    None
):
    asked: list[list[tuple[str, int]]] = []

    def source_ends(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        asked.append(partitions)
        return {("orders", 0): 35}

    positions, notices = start_positions(
        RANGES, {("A.orders", 0): (900, "")}, {("orders", 0): 30}, source_ends
    )
    assert asked == [[("orders", 0)]]
    assert positions == {("orders", 0): EARLIEST}
    assert notices == [
        "orders partition 0 ends at 35, below ferry's position 900: recreated? "
        "copying it from its start"
    ]


def test_a_position_beyond_the_planned_end_but_not_the_end_now_is_kept() -> None:
    # A retried attempt: the failed one committed past the ends seen when the lease was planned.
    positions, notices = start_positions(
        RANGES,
        {("A.orders", 0): (3600, "")},
        {("orders", 0): 3197},
        lambda _tps: {("orders", 0): 3650},
    )
    assert positions == {("orders", 0): 3600}
    assert notices == []


OLD_ID, NEW_ID = "Zm9vYmFyYmF6cXV4MDEyMw", "cXV4YmF6YmFyZm9vMzIxMA"


def test_a_position_in_another_topic_of_the_same_name_starts_the_new_one_at_its_start() -> None:
    # The new topic already holds more than the old position, so its end cannot tell: the id.
    ranges = [replace(r, topic_id=NEW_ID) for r in RANGES]
    positions, notices = start_positions(
        ranges, {("A.orders", 0): (40, OLD_ID)}, {("orders", 0): 900}, _never_asked
    )
    assert positions == {("orders", 0): EARLIEST}
    assert notices == [
        f"orders partition 0: ferry's position 40 is in topic id {OLD_ID}, the topic's id is "
        f"{NEW_ID} now: deleted and re-created; copying it from its start"
    ]


@pytest.mark.parametrize(
    ("planned", "committed"),
    [(NEW_ID, NEW_ID), ("", OLD_ID), (NEW_ID, "")],
    ids=["same", "planned-unknown", "committed-unknown"],
)
def test_a_position_in_the_same_topic_or_one_whose_id_is_not_known_is_kept(
    planned: str, committed: str
) -> None:
    ranges = [replace(r, topic_id=planned) for r in RANGES]
    positions, notices = start_positions(
        ranges, {("A.orders", 0): (40, committed)}, {("orders", 0): 900}, _never_asked
    )
    assert positions == {("orders", 0): 40} and notices == []


def test_a_lease_copies_with_the_ids_its_topics_have_now_where_the_source_gave_them() -> None:
    # A retried task holds the plan's ranges: planned before the topic was re-created.
    ranges = [
        CopyRange("orders", 0, EARLIEST, OPEN, "A.orders", 1_000_000, OLD_ID),
        CopyRange("payments", 0, EARLIEST, OPEN, "A.payments", 1_000_000, OLD_ID),
    ]
    now = with_source_ids(ranges, {"orders": NEW_ID, "payments": ""})
    assert [r.topic_id for r in now] == [NEW_ID, OLD_ID]
    positions, notices = start_positions(
        now, {("A.orders", 0): (40, OLD_ID)}, {("orders", 0): 900}, _never_asked
    )
    assert positions[("orders", 0)] == EARLIEST and len(notices) == 1


class FakeLoop:
    """A partition that gains 10 records per slice; a non-settling slice leaves 3 in flight."""

    def __init__(self) -> None:
        self.slices: list[tuple[int, Slice]] = []

    def __call__(self, work: list[CopyRange], slice: Slice) -> list[PartitionResult]:
        (r,) = work
        assert r.end == OPEN
        self.slices.append((r.start, slice))
        start = max(r.start, 0)
        in_flight = 0 if slice.settle else 3
        return [
            PartitionResult(
                r.topic,
                r.partition,
                r.start,
                start + 10 - in_flight,
                copied=10,
                in_flight=in_flight,
            )
        ]


def test_slices_follow_each_other_and_the_last_one_settles() -> None:
    loop, committed = FakeLoop(), []
    stops = iter([False, False, False, True])
    terms = LeaseTerms(60, 1.0, lambda: next(stops))
    results = run_lease(RANGES, {("orders", 0): 100}, terms, loop, committed.append)

    starts = [start for start, _ in loop.slices]
    assert starts == [100, 107, 114, 121]  # each starts where the last acknowledged copy ended
    assert [s.continuing for _, s in loop.slices] == [False, True, True, True]
    assert [s.settle for _, s in loop.slices] == [False, False, False, True]
    assert [s.in_flight for _, s in loop.slices] == [{}] + [{("orders", 0): 3}] * 3
    assert len(committed) == 4  # after every slice
    (total,) = results
    assert (total.start, total.end, total.copied) == (100, 131, 40)


def test_a_lease_stopped_before_its_first_slice_copies_nothing() -> None:
    loop = FakeLoop()
    results = run_lease(RANGES, {("orders", 0): 5}, LeaseTerms(60, 1.0, lambda: True), loop, print)
    assert loop.slices == []
    assert [(r.start, r.end, r.copied) for r in results] == [(5, 5, 0)]


class FakeProducer:
    def __init__(self) -> None:
        self.queued: list[Any] = []
        self.fail = False

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
        self.queued.append(on_delivery)

    def poll(self, _timeout: float) -> int:
        return 0  # deliveries happen when the test says so

    def deliver(self) -> None:
        err = _Err() if self.fail else None
        for callback in self.queued:
            callback(err, None)
        self.queued.clear()

    def flush(self, _timeout: float) -> int:
        self.deliver()
        return 0


class _Err:
    def name(self) -> str:
        return "TOPIC_AUTHORIZATION_FAILED"

    def str(self) -> str:
        return "Broker: Topic authorization failed"


class FakeProgress:
    def __init__(self) -> None:
        self.commits: list[tuple[list[tuple[str, int, int]], bool]] = []

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.commits.append(([(o.topic, o.partition, o.offset) for o in offsets], asynchronous))


def _result(end: int) -> PartitionResult:
    return PartitionResult("orders", 0, 0, end, runs=[OffsetRun(0, 0, end)])


def _committer() -> tuple[LeaseCommitter, FakeProducer, FakeProgress]:
    producer, progress = FakeProducer(), FakeProgress()
    target = ClusterConfig(alias="B", bootstrap_servers="b:9092")
    return LeaseCommitter(producer, progress, "runs", "A", target), producer, progress


def test_a_position_is_committed_only_once_its_runs_are_acknowledged() -> None:
    committer, producer, progress = _committer()
    committer.commit([_result(10)], {("A.orders", 0): 10})
    assert progress.commits == []  # its runs are not acknowledged yet
    producer.deliver()
    committer.commit([_result(20)], {("A.orders", 0): 20})
    assert progress.commits == [([("A.orders", 0, 10)], True)]  # not 20: its runs are pending
    committer.finish()
    assert progress.commits[-1] == ([("A.orders", 0, 20)], False)  # the lease's end, waited for


def test_a_refused_offset_run_stops_the_lease_naming_the_runs_topic() -> None:
    committer, producer, progress = _committer()
    producer.fail = True
    committer.commit([_result(10)], {("A.orders", 0): 10})
    producer.deliver()
    with pytest.raises(ReplicationError, match="could not write 1 offset run") as raised:
        committer.commit([_result(20)], {("A.orders", 0): 20})
    assert raised.value.topic == "runs" and raised.value.cluster == "B"
    assert progress.commits == []


class CatchingUp:
    """Copies `per_slice[i]` records in slice i (all acknowledged)."""

    def __init__(self, per_slice: list[int]) -> None:
        self.per_slice = per_slice
        self.seconds: list[float] = []

    def __call__(self, work: list[CopyRange], slice: Slice) -> list[PartitionResult]:
        (r,) = work
        copied = self.per_slice[len(self.seconds)]
        self.seconds.append(slice.seconds)
        return [PartitionResult(r.topic, r.partition, r.start, r.start + copied, copied=copied)]


def test_at_least_once_slices_stay_short_while_catching_up() -> None:
    loop = CatchingUp([50_000, 20_000, 9_000, 10, 10])
    stops = iter([False, False, False, False, True])
    terms = LeaseTerms(60, 1.0, lambda: next(stops), short_catch_up_slices=True)
    run_lease(RANGES, {("orders", 0): 0}, terms, loop, lambda _results: None)
    # The first slice (a backlog may wait), then after each big one: short; then the interval.
    assert loop.seconds[:4] == [0.1, 0.1, 0.1, 1.0]


def test_exactly_once_slices_keep_the_commit_interval() -> None:
    loop = CatchingUp([50_000, 20_000, 10])
    stops = iter([False, False, True])
    terms = LeaseTerms(60, 1.0, lambda: next(stops))
    run_lease(RANGES, {("orders", 0): 0}, terms, loop, lambda _results: None)
    assert loop.seconds[:2] == [1.0, 1.0]
