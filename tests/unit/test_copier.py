"""The copy loop `copy_bin`, driven by in-memory Kafka fakes (no broker, no Spark).

Source logs are `Log`s of `Rec`s (see tests/unit/fake_kafka.py); what the copier produced is
read back from `FakeProducer.logs`, where every partition's target offsets start at 1000.
Each test names the behaviour it pins: what a copy keeps and adds, which records it skips,
the exact offset runs it reports from delivery reports, and how it fails.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.record_size import single_record_batch_size
from ferry.engine.copy.types import EARLIEST, CopyContext, CopyRange, PartitionResult
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.offset_runs import OffsetRun
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from tests.unit.fake_kafka import FakeConsumer, FakeMessage, FakeProducer, Log, Rec, log_of

SOURCE_ID = "c291cmNlLWNsdXN0ZXItaWQ"
TARGET_ID = "dGFyZ2V0LWNsdXN0ZXItaWQ"
# A short stall timeout turns a copy loop that never finishes into a failure, not a hang.
CTX = CopyContext("A", "a:9092", SOURCE_ID, "B", "b:9092", TARGET_ID, stall_timeout=2.0)
T0 = 1000  # FakeProducer's first target offset in every partition


def rng(
    start: int,
    end: int,
    partition: int = 0,
    topic: str = "orders",
    max_bytes: int = 1_000_000,
) -> CopyRange:
    return CopyRange(topic, partition, start, end, f"A.{topic}", max_bytes)


def origin(offset: int, partition: int = 0, topic: str = "orders") -> bytes:
    return Origin(SOURCE_ID, "A", topic, partition, offset).to_bytes()


def upstream_offset(record: Rec) -> int:
    """The source offset a target record was copied from, read from its ferry.origin."""
    assert record.headers is not None
    values = [v for name, v in record.headers if name == ORIGIN_HEADER]
    assert len(values) == 1 and values[0] is not None
    return Origin.from_bytes(values[0]).offset


@dataclass
class Mirror:
    """A consumer over `logs`, a producer into in-memory target logs, and their tracker."""

    consumer: FakeConsumer
    producer: FakeProducer
    tracker: DeliveryTracker

    def copy(
        self, *ranges: CopyRange, ctx: CopyContext = CTX
    ) -> dict[tuple[str, int], PartitionResult]:
        results = copy_bin(self.consumer, self.producer, self.tracker, ranges, ctx)
        keyed = {(r.topic, r.partition): r for r in results}
        assert len(keyed) == len(results)
        return keyed

    def target(self, partition: int = 0, topic: str = "A.orders") -> list[Rec]:
        return self.producer.logs.get((topic, partition), [])

    def copied_upstream(self, partition: int = 0, topic: str = "A.orders") -> list[int]:
        return [upstream_offset(r) for r in self.target(partition, topic)]


def mirror(logs: dict[tuple[str, int], Log], **producer_options: object) -> Mirror:
    tracker = DeliveryTracker()
    producer = FakeProducer(**producer_options)  # type: ignore[arg-type]
    return Mirror(FakeConsumer(logs), producer, tracker)


# -- what a copy keeps and adds ------------------------------------------------------------


def test_copy_keeps_key_value_headers_timestamp_and_partition_and_adds_origin() -> None:
    source = [
        Rec(0, b"k0", b"v0", [("h", b"1"), ("h", b"2"), ("empty", None), ("h", b"")], 111),
        Rec(1, None, b"v1", None, 222),  # no key, no headers
        Rec(2, b"k2", None, [("z", b"3")], 333),  # tombstone
        Rec(3, None, None, [], 444),
    ]
    m = mirror({("orders", 3): Log(source)})

    results = m.copy(rng(0, 4, partition=3))

    assert m.producer.logs.keys() == {("A.orders", 3)}
    copies = m.target(partition=3)
    assert len(copies) == len(source)
    for copy, rec in zip(copies, source, strict=True):
        assert copy.key == rec.key
        assert copy.value == rec.value
        assert copy.timestamp == rec.timestamp
        assert copy.headers == [*(rec.headers or []), (ORIGIN_HEADER, origin(rec.offset, 3))]
    assert results[("orders", 3)].copied == 4


def test_record_with_an_origin_keeps_it_unchanged() -> None:
    first_hop = Origin("Y2x1c3Rlci1DLWlk", "C", "orders", 5, 77).to_bytes()
    headers: list[tuple[str, bytes | None]] = [("a", b"1"), (ORIGIN_HEADER, first_hop), ("b", None)]
    m = mirror({("orders", 0): Log([Rec(0, b"k", b"v", headers)])})

    m.copy(rng(0, 1))

    [copy] = m.target()
    assert copy.headers == headers  # same header, same place, no second ferry.origin


# -- loop prevention ------------------------------------------------------------------------


def test_records_that_came_from_the_target_are_skipped_not_copied() -> None:
    def rec(offset: int, origin_value: bytes | None = None) -> Rec:
        headers = None if origin_value is None else [(ORIGIN_HEADER, origin_value)]
        return Rec(offset, b"k%d" % offset, b"v%d" % offset, headers)

    source = [
        rec(0),
        rec(1),
        rec(2, f"{TARGET_ID}|B|0|40|orders".encode()),  # copied from the target: a loop
        rec(3, f"{TARGET_ID}X|X|0|41|orders".encode()),  # another cluster whose id starts alike
        rec(4, f"{TARGET_ID}|B|0|42|orders".encode()),  # the range's last record loops too
    ]
    m = mirror({("orders", 0): Log(source, end=8)})

    result = m.copy(rng(0, 5))[("orders", 0)]

    assert [r.value for r in m.target()] == [b"v0", b"v1", b"v3"]
    assert (result.copied, result.skipped) == (3, 2)
    assert result.runs == [OffsetRun(0, T0, 2), OffsetRun(3, T0 + 2, 1)]


# -- exact runs from delivery reports -----------------------------------------------------


def test_runs_follow_the_gaps_of_a_compacted_log() -> None:
    m = mirror(
        {
            ("orders", 0): log_of(0, 1, 2, 5, 6, 9, end=10),
            ("orders", 1): log_of(3, 4, 8, 11, 12, 13, start=0, end=15),
        }
    )

    results = m.copy(rng(0, 10, partition=0), rng(0, 15, partition=1))

    p0, p1 = results[("orders", 0)], results[("orders", 1)]
    assert p0.runs == [OffsetRun(0, T0, 3), OffsetRun(5, T0 + 3, 2), OffsetRun(9, T0 + 5, 1)]
    assert p1.runs == [OffsetRun(3, T0, 2), OffsetRun(8, T0 + 2, 1), OffsetRun(11, T0 + 3, 3)]
    for partition, result in [(0, p0), (1, p1)]:
        from_runs = {
            run.upstream_start + i: run.downstream_start + i
            for run in result.runs
            for i in range(run.count)
        }
        from_headers = {upstream_offset(r): r.offset for r in m.target(partition)}
        assert from_runs == from_headers
        assert result.copied == len(from_headers)
        assert result.bytes == sum(
            len(r.key or b"") + len(r.value or b"") for r in m.target(partition)
        )
        assert result.skipped == result.expired == 0


def test_runs_pair_reports_with_offsets_when_deliveries_lag_behind_produce() -> None:
    m = mirror({("orders", 0): log_of(*range(0, 40, 2), end=40)}, reports_per_call=1)

    result = m.copy(rng(0, 40))[("orders", 0)]

    assert result.runs == [OffsetRun(2 * i, T0 + i, 1) for i in range(20)]


# -- range bounds -------------------------------------------------------------------------


def test_only_the_planned_range_is_copied() -> None:
    m = mirror({("orders", 0): log_of(*range(10))})

    result = m.copy(rng(2, 5))[("orders", 0)]

    assert m.copied_upstream() == [2, 3, 4]
    assert (result.start, result.end, result.copied) == (2, 5, 3)
    assert result.runs == [OffsetRun(2, T0, 3)]


def test_a_range_whose_last_offset_was_compacted_stops_before_the_next_record() -> None:
    m = mirror({("orders", 0): log_of(0, 1, 2, 3, 5, 6)})  # offset 4 compacted away

    result = m.copy(rng(0, 5))[("orders", 0)]

    assert m.copied_upstream() == [0, 1, 2, 3]
    assert result.runs == [OffsetRun(0, T0, 4)]


def test_an_empty_range_copies_nothing() -> None:
    m = mirror({("orders", 0): log_of(*range(10)), ("orders", 1): log_of(*range(10))})

    results = m.copy(rng(3, 3, partition=0), rng(0, 2, partition=1))

    assert m.producer.logs.keys() == {("A.orders", 1)}
    assert m.consumer.assigned_log == [[("orders", 1, 0)]]
    assert ("orders", 0) not in results or results[("orders", 0)].copied == 0


def test_only_empty_ranges_produce_and_assign_nothing() -> None:
    m = mirror({("orders", 0): log_of(*range(10))})

    assert m.copy(rng(4, 4)) == {}
    assert m.producer.logs == {}
    assert m.consumer.assigned_log == []


def test_earliest_starts_at_the_log_start() -> None:
    m = mirror({("orders", 0): log_of(*range(5, 10), start=5)})

    result = m.copy(rng(EARLIEST, 10))[("orders", 0)]

    assert m.consumer.assigned_log == [[("orders", 0, EARLIEST)]]
    assert m.copied_upstream() == [5, 6, 7, 8, 9]
    assert (result.copied, result.expired) == (5, 0)
    assert result.runs == [OffsetRun(5, T0, 5)]


def test_a_bin_copies_each_of_its_ranges() -> None:
    m = mirror(
        {
            ("orders", 0): log_of(*range(10)),
            ("orders", 1): log_of(*range(10)),
            ("payments", 0): log_of(*range(3, 8), start=3),
        }
    )

    results = m.copy(
        rng(0, 3, partition=0),
        rng(2, 6, partition=1),
        rng(EARLIEST, 5, topic="payments"),
    )

    assert m.copied_upstream(0) == [0, 1, 2]
    assert m.copied_upstream(1) == [2, 3, 4, 5]
    assert m.copied_upstream(0, "A.payments") == [3, 4]
    assert results[("orders", 0)].runs == [OffsetRun(0, T0, 3)]
    assert results[("orders", 1)].runs == [OffsetRun(2, T0, 4)]
    assert results[("payments", 0)].runs == [OffsetRun(3, T0, 2)]
    assert m.consumer.positions == {}  # everything unassigned afterwards


# -- a range that ends in a gap -----------------------------------------------------------


def test_a_range_ending_in_a_gap_completes_at_end_of_partition() -> None:
    # Offsets 7..9 are transaction markers or aborted records: a read_committed consumer
    # never sees them, only the end-of-partition event at 10.
    m = mirror({("orders", 0): log_of(*range(7), end=10)})

    result = m.copy(rng(0, 10), ctx=CTX)[("orders", 0)]

    assert m.copied_upstream() == list(range(7))
    assert result.runs == [OffsetRun(0, T0, 7)]


def test_a_range_that_is_all_gap_completes_with_nothing_copied() -> None:
    m = mirror({("orders", 0): log_of(*range(7), end=10)})

    result = m.copy(rng(7, 10))[("orders", 0)]

    assert m.producer.logs == {}
    assert (result.copied, result.runs) == (0, [])


# -- records the target would refuse ------------------------------------------------------


def test_a_record_too_large_for_the_target_halts_before_it() -> None:
    big = b"x" * 3000
    m = mirror(
        {
            ("orders", 0): log_of(*range(6), value=lambda o: big if o == 3 else b"v%d" % o),
            ("orders", 1): log_of(*range(6)),
        }
    )

    with pytest.raises(ReplicationError) as caught:
        m.copy(rng(0, 6, partition=0, max_bytes=2000), rng(0, 6, partition=1, max_bytes=2000))

    error = caught.value
    assert (error.cluster, error.topic, error.partition, error.offset) == ("A", "orders", 0, 3)
    assert "max.message.bytes" in str(error)
    assert "A.orders" in (error.fix or "")
    assert all(offset < 3 for offset in m.copied_upstream(0))


def test_the_size_limit_is_exact() -> None:
    limit = 20_000
    headers = [(ORIGIN_HEADER, origin(0))]
    fits = next(
        n
        for n in range(limit, 0, -1)
        if single_record_batch_size(b"k0", b"x" * n, headers) <= limit
    )
    assert single_record_batch_size(b"k0", b"x" * fits, headers) == limit

    ok = mirror({("orders", 0): log_of(0, value=lambda _: b"x" * fits)})
    ok.copy(rng(0, 1, max_bytes=limit))
    assert ok.copied_upstream() == [0]

    too_big = mirror({("orders", 0): log_of(0, value=lambda _: b"x" * (fits + 1))})
    with pytest.raises(ReplicationError, match=f"record is {limit + 1} bytes"):
        too_big.copy(rng(0, 1, max_bytes=limit))
    assert too_big.producer.logs == {}


def test_a_record_too_large_because_of_its_headers_halts_before_it() -> None:
    headers: list[tuple[str, bytes | None]] = [("trace", b"x" * 30_000)]
    m = mirror({("orders", 0): Log([Rec(0, b"k", b"v", headers)])})

    with pytest.raises(ReplicationError, match=r"max\.message\.bytes"):
        m.copy(rng(0, 1, max_bytes=20_000))


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        (KafkaError.MSG_SIZE_TOO_LARGE, "raise max.message.bytes of topic A.orders on B"),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "WRITE on topic A.orders in B"),
        (KafkaError.INVALID_RECORD, "see the error above"),
    ],
)
def test_a_refused_delivery_halts_at_the_refused_upstream_offset(code: int, fix: str) -> None:
    m = mirror({("orders", 2): log_of(0, 1, 4, 5, 6, 9, end=10)}, refuse={b"v5": KafkaError(code)})

    with pytest.raises(ReplicationError) as caught:
        m.copy(rng(0, 10, partition=2))

    error = caught.value
    assert (error.cluster, error.topic, error.partition, error.offset) == ("A", "orders", 2, 5)
    assert fix in (error.fix or "")
    assert KafkaError(code).name() in str(error)


def test_a_timed_out_delivery_is_a_retryable_unavailability() -> None:
    m = mirror(
        {("orders", 0): log_of(*range(4))}, refuse={b"v2": KafkaError(KafkaError._MSG_TIMED_OUT)}
    )

    with pytest.raises(KafkaUnavailableError) as caught:
        m.copy(rng(0, 4))

    assert (caught.value.cluster, caught.value.bootstrap) == ("B", "b:9092")
    assert "A.orders" in caught.value.detail


class FencedProducer(FakeProducer):
    """Fenced by a newer producer of its transactional id: librdkafka raises the fatal error
    from poll() and flush() too, not only from the transactional calls."""

    def poll(self, timeout: float = 0) -> int:
        raise KafkaException(
            KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
        )

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0


def test_a_fenced_producer_fails_the_copy_with_an_error_ferry_retries() -> None:
    """A raw librdkafka exception reached `ferry run` with no ferry error in it and stopped
    the run; being fenced is retried (the new producer fences the newer writer back)."""
    m = Mirror(
        FakeConsumer({("orders", 0): log_of(*range(4))}), FencedProducer(), DeliveryTracker()
    )

    with pytest.raises(KafkaUnavailableError) as caught:
        m.copy(rng(0, 4))

    assert caught.value.cluster == "B"
    assert "fenced" in caught.value.what
    assert "another ferry run of this flow" in caught.value.detail


def test_a_record_refused_by_produce_halts_at_its_offset() -> None:
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    m = mirror({("orders", 0): log_of(*range(4))}, raise_on_produce={b"v2": too_large})

    with pytest.raises(ReplicationError) as caught:
        m.copy(rng(0, 4))

    assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("orders", 0, 2)
    assert "B.producer.message.max.bytes" in (caught.value.fix or "")
    assert m.copied_upstream() == [0, 1]


# -- retention, back-pressure, stalls -----------------------------------------------------


@pytest.mark.parametrize(("start", "expired"), [(0, 4), (2, 2)])
def test_records_deleted_by_retention_are_counted_and_copying_goes_on(
    start: int, expired: int
) -> None:
    m = mirror({("orders", 0): log_of(*range(4, 10), start=4)})

    result = m.copy(rng(start, 10))[("orders", 0)]

    assert m.consumer.reassigned == [("orders", 0, 4)]
    assert m.copied_upstream() == [4, 5, 6, 7, 8, 9]
    assert (result.expired, result.copied) == (expired, 6)
    assert result.runs == [OffsetRun(4, T0, 6)]


class AwaySource(FakeConsumer):
    """The source stops answering right after it said the position is below its log start:
    reading the partition's bounds fails, or times out (None)."""

    def __init__(self, logs: dict[tuple[str, int], Log], answer: KafkaError | None) -> None:
        super().__init__(logs)
        self.answer = answer

    def get_watermark_offsets(self, tp: object, timeout: float = 0, cached: bool = False) -> None:
        if self.answer is not None:
            raise KafkaException(self.answer)
        return None


@pytest.mark.parametrize("answer", [KafkaError(KafkaError._TRANSPORT, "Connection refused"), None])
def test_a_source_away_while_expired_records_are_counted_is_retried_and_named(
    answer: KafkaError | None,
) -> None:
    """A bare librdkafka exception (or a failed unpacking of no answer) stopped `ferry run`."""
    consumer = AwaySource({("orders", 0): log_of(*range(4, 10), start=4)}, answer)
    m = Mirror(consumer, FakeProducer(), DeliveryTracker())

    with pytest.raises(KafkaUnavailableError) as caught:
        m.copy(rng(0, 10))

    assert (caught.value.cluster, caught.value.bootstrap) == ("A", "a:9092")
    assert "orders partition 0" in caught.value.detail
    assert m.producer.logs == {}


def test_expired_never_counts_more_than_the_range() -> None:
    m = mirror({("orders", 0): log_of(8, 9, start=8)})

    result = m.copy(rng(0, 3))[("orders", 0)]

    assert m.producer.logs == {}
    assert (result.expired, result.copied) == (3, 0)


def test_a_full_producer_queue_is_retried_and_the_record_copied_once() -> None:
    m = mirror({("orders", 0): log_of(*range(5))}, buffer_errors=2)

    result = m.copy(rng(0, 5))[("orders", 0)]

    assert m.copied_upstream() == [0, 1, 2, 3, 4]
    assert m.producer.produce_calls == 7
    assert result.copied == 5
    assert result.runs == [OffsetRun(0, T0, 5)]


def test_a_target_that_acknowledges_nothing_gives_the_batch_up_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # librdkafka never times a copy out (message.timeout.ms = 0); the loop gives the whole
    # batch up instead, so nothing of it is committed and its retry starts where it started.
    monkeypatch.setattr("ferry.engine.copy.ack_wait.ACK_TIMEOUT_SECONDS", 0.05)
    m = mirror({("orders", 0): log_of(*range(5))})
    m.producer.down = True

    with pytest.raises(KafkaUnavailableError) as gave_up:
        m.copy(rng(0, 5))

    assert str(gave_up.value).startswith(
        "cluster B (b:9092) did not acknowledge copies: 5 copies got no acknowledgement in 0 s; "
        "nothing of this batch is committed, the batch is copied again from the last committed "
        "position, in order"
    )
    assert m.producer.purges == 1
    assert m.producer.logs == {}


def test_a_stop_ends_the_wait_for_a_silent_target_sooner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ferry.engine.copy.ack_wait.STOP_GRACE_SECONDS", 0.05)
    m = mirror({("orders", 0): log_of(*range(5))})
    m.producer.down = True
    looks = [0]

    def stopping() -> bool:  # ferry stops at the 20th look of the wait
        looks[0] += 1
        return looks[0] >= 20

    with pytest.raises(KafkaUnavailableError) as stopped:
        m.copy(rng(0, 5), ctx=replace(CTX, stopping=stopping))

    assert looks[0] >= 20
    assert "did not acknowledge copies: ferry run is stopping and 5 copies got" in str(
        stopped.value
    )
    assert m.producer.purges == 1


def test_a_full_queue_that_does_not_drain_gives_the_batch_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("ferry.engine.copy.ack_wait.ACK_TIMEOUT_SECONDS", 0.0)
    m = mirror({("orders", 0): log_of(*range(5))}, buffer_errors=10**9)

    with pytest.raises(KafkaUnavailableError, match="did not acknowledge copies"):
        m.copy(rng(0, 5))

    assert m.producer.purges == 1


def test_a_partition_the_producer_does_not_know_yet_is_retried_after_a_metadata_refresh() -> None:
    # The planner added the partition a moment ago; this cached producer's metadata predates it.
    m = mirror({("orders", 0): log_of(*range(3))}, unknown_partition_errors=3)

    m.copy(rng(0, 3))

    assert m.copied_upstream() == [0, 1, 2]
    assert m.producer.metadata_requests == 3


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(Log([], start=0, end=0), id="nothing-arrives"),
        pytest.param(log_of(*range(5)), id="log-ends-before-range"),
    ],
)
def test_a_range_whose_records_never_arrive_stalls_out(log: Log) -> None:
    ctx = CopyContext("A", "a:9092", SOURCE_ID, "B", "b:9092", TARGET_ID, stall_timeout=0.3)
    m = mirror({("orders", 0): log})

    began = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as caught:
        m.copy(rng(0, 8), ctx=ctx)

    assert time.monotonic() - began >= 0.3  # it gave the range its stall timeout first
    assert (caught.value.cluster, caught.value.bootstrap) == ("A", "a:9092")
    assert "orders" in caught.value.detail
    assert m.consumer.positions == {}  # unassigned on the way out


def test_transient_error_events_do_not_count_as_progress() -> None:
    ctx = CopyContext("A", "a:9092", SOURCE_ID, "B", "b:9092", TARGET_ID, stall_timeout=0.3)
    began = time.monotonic()
    last = [0.0]

    def transport_error_every_100ms() -> FakeMessage | None:
        now = time.monotonic()
        if now - began > 3.0:
            raise RuntimeError("copy_bin still looping 3 s after a 0.3 s stall timeout")
        if now - last[0] < 0.1:
            return None
        last[0] = now
        return FakeMessage(None, -1, -1001, error=KafkaError(KafkaError._TRANSPORT))

    m = mirror({("orders", 0): Log([], start=0, end=0)})
    m.consumer.noise = transport_error_every_100ms

    with pytest.raises(KafkaUnavailableError):
        m.copy(rng(0, 8), ctx=ctx)


def test_tracker_pairs_reports_per_partition() -> None:
    tracker = DeliveryTracker()
    tracker.expect("A.orders", 0, "orders").extend([3, 4])
    tracker.expect("A.orders", 1, "orders").extend([7])

    tracker.on_delivery(None, FakeMessage("A.orders", 1, 50))
    tracker.on_delivery(None, FakeMessage("A.orders", 0, 10))
    tracker.on_delivery(KafkaError(KafkaError.INVALID_RECORD), FakeMessage("A.orders", 0, -1))

    assert tracker.builders[("A.orders", 0)].runs() == [OffsetRun(3, 10, 1)]
    assert tracker.builders[("A.orders", 1)].runs() == [OffsetRun(7, 50, 1)]
    assert [(t, p, o) for t, p, o, _ in tracker.errors] == [("A.orders", 0, 4)]


# -- delivery reports per chunk (ferry alone writes the remote topic) ---------------------


def test_a_renamed_remote_topic_is_tracked_with_two_reports_per_fetched_chunk() -> None:
    m = mirror({("orders", 0): log_of(*range(0, 30), *range(40, 50), end=50)})
    m.consumer.fetch_size = 100

    result = m.copy(rng(0, 50))[("orders", 0)]

    assert result.runs == [OffsetRun(0, T0, 30), OffsetRun(40, T0 + 30, 10)]
    assert m.producer.callbacks == 2  # the first and the last copy of the one fetched batch


def test_the_identity_policy_is_tracked_per_record_and_exact_beside_other_writers() -> None:
    # The remote topic is named like the source topic: the target's own producers write it too.
    m = mirror({("orders", 0): log_of(*range(6))}, foreign_after={b"v2": 3})
    m.consumer.fetch_size = 100

    result = m.copy(CopyRange("orders", 0, 0, 6, "orders", 1_000_000))[("orders", 0)]

    assert result.runs == [OffsetRun(0, T0, 3), OffsetRun(3, T0 + 6, 3)]
    assert m.producer.callbacks == 6


def test_another_writer_inside_a_chunk_fails_the_batch_then_the_retry_tracks_every_copy() -> None:
    m = mirror({("orders", 0): log_of(*range(10))}, foreign_after={b"v4": 2})
    m.consumer.fetch_size = 100

    with pytest.raises(KafkaUnavailableError) as caught:
        m.copy(rng(0, 10))

    error = caught.value
    assert error.cluster == "B" and error.what == "needs a batch copied again"
    assert "10 copies into A.orders partition 0" in error.detail
    assert f"took target offsets {T0} to {T0 + 11}, 12 places" in error.detail
    assert ("A.orders", 0) in m.tracker.per_record

    m.producer.foreign_after = {b"v7": 1}  # the other writer again, during the retry
    result = m.copy(rng(0, 10))[("orders", 0)]
    # Copies of the retry start after the first attempt's 10 copies and 2 foreign records.
    retry = T0 + 12
    assert result.runs == [OffsetRun(0, retry, 8), OffsetRun(8, retry + 9, 2)]


def test_a_copy_lost_without_a_report_inside_a_chunk_is_caught_by_the_span() -> None:
    # Only the chunk's ends carry callbacks: a refused copy in the middle reports nothing, but
    # takes no offset either. The retry tracks every copy and halts at the refused one.
    refused = KafkaError(KafkaError.INVALID_RECORD)
    m = mirror({("orders", 0): log_of(*range(8))}, refuse={b"v3": refused})
    m.consumer.fetch_size = 100

    with pytest.raises(KafkaUnavailableError, match="a copy was lost in delivery"):
        m.copy(rng(0, 8))
    with pytest.raises(ReplicationError) as caught:
        m.copy(rng(0, 8))

    assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("orders", 0, 3)


def test_a_chunk_with_gaps_upstream_maps_each_copy_to_its_own_offset() -> None:
    m = mirror({("orders", 0): log_of(0, 1, 2, 5, 6, 9, end=10)})
    m.consumer.fetch_size = 100

    result = m.copy(rng(0, 10))[("orders", 0)]

    assert result.runs == [OffsetRun(0, T0, 3), OffsetRun(5, T0 + 3, 2), OffsetRun(9, T0 + 5, 1)]
    assert m.producer.callbacks == 2
