"""Planning a lease: the pure steps (engine/plan/leases.py), and the planner's reads around them.

The planner is driven with a stand-in topic manager and progress consumer that count what
they are asked: one lease's plan reads the source's ends once and the flow's positions on the
target once, however many partitions; a target that does not answer leaves placement to this
machine's counters.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.copy import worker_clients
from ferry.engine.copy.types import EARLIEST, OPEN
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.plan.batches import TP
from ferry.engine.plan.leases import lags, lease_rows, lease_weights, read_counters
from ferry.engine.plan.remote_topics import RemoteTopic
from ferry.engine.spark.source import RANGE_FIELDS, Planner
from ferry.kafka.admin_batches import MAX_PARTITIONS_PER_COMMITTED_READ
from ferry.policy import policy_for
from tests.unit.fake_kafka import TopicIdAdmin

# --- pure steps ---------------------------------------------------------------------------


def test_lag_is_the_end_minus_the_position_and_a_partition_never_committed_lags_from_zero() -> None:
    ends = {("a", 0): 10, ("a", 1): 7, ("b", 0): 5, ("b", 1): 3}
    positions = {("a", 0): 4, ("a", 1): -1001, ("b", 1): 9}
    assert lags(ends, positions) == {("a", 0): 6, ("a", 1): 7, ("b", 0): 5, ("b", 1): 0}


def test_counters_give_records_so_far_and_bytes_per_record_of_partitions_that_copied() -> None:
    counters = read_counters(
        {
            "orders:0": {"records": 4, "bytes": 400, "position": 4},
            "my:topic:1": {"records": 0, "bytes": 0},
        }
    )
    assert counters.records == {("orders", 0): 4, ("my:topic", 1): 0}
    assert counters.record_bytes == {("orders", 0): 100.0}


def test_a_weight_is_one_plus_what_was_carried_since_the_last_plan_plus_the_lag() -> None:
    carried: dict[TP, int] = {}
    first = lease_weights({("a", 0): 50}, carried, {("a", 0): 5, ("a", 1): 20})
    assert first == {("a", 0): 56, ("a", 1): 21}
    assert carried == {("a", 0): 50}
    second = lease_weights({("a", 0): 80, ("a", 1): 3}, carried, {})
    assert second == {("a", 0): 31, ("a", 1): 4}
    assert carried == {("a", 0): 80, ("a", 1): 3}


def _rows(
    topics: dict[str, int],
    weights: dict[TP, int],
    bins: int,
    previous: dict[TP, int],
    *,
    by_name: bool = False,
) -> list[list[tuple[Any, ...]]]:
    return lease_rows(
        topics,
        weights,
        bins,
        remote_topic=lambda t: f"A.{t}",
        max_message_bytes={"big": 5_000_000},
        log_ends={("big", 0): 42},
        cluster_ids=("src-id", "dst-id"),
        record_bytes={},
        previous=previous,
        by_name=by_name,
    )


def _bins_of(packed: list[list[tuple[Any, ...]]]) -> dict[TP, int]:
    return {(row[0], row[1]): index for index, rows in enumerate(packed) for row in rows}


def test_exactly_once_plans_put_a_partition_in_the_same_bin_whatever_the_loads_and_history() -> (
    None
):
    """Two runs of one flow plan apart (a paused run woken beside its successor): their
    exactly-once tasks write a partition under its bin's transactional ids, so they must
    agree on the bin, or two writers neither fences copy it from the same position."""
    topics = {"orders": 3, "payments": 5, "audit": 1}
    woken = _rows(topics, {("orders", 2): 90_000}, 3, {("orders", 2): 0}, by_name=True)
    successor = _rows(topics, {("payments", 4): 70_000, ("orders", 0): 5}, 3, {}, by_name=True)
    assert _bins_of(woken) == _bins_of(successor)
    assert len(_bins_of(woken)) == 9  # every partition, once
    # A topic's partitions go round the bins: its three partitions in three bins.
    assert len({_bins_of(woken)[("orders", p)] for p in range(3)}) == 3


def test_exactly_once_plans_keep_empty_bins_so_a_bins_index_never_shifts() -> None:
    packed = _rows({"one": 1}, {}, 4, {}, by_name=True)
    assert len(packed) == 4 and sum(len(rows) for rows in packed) == 1
    # A topic the other run does not know yet moves nothing of the topics both know.
    both = _bins_of(_rows({"one": 1, "two": 2}, {}, 4, {}, by_name=True))
    assert both[("one", 0)] == _bins_of(packed)[("one", 0)]


def test_every_partition_is_in_exactly_one_bin_copied_from_the_position_with_no_end() -> None:
    topics = {"big": 3, "small": 2}
    previous: dict[TP, int] = {}
    packed = _rows(topics, {("big", 0): 1000}, 2, previous)
    assert len(packed) == 2
    rows = [dict(zip(RANGE_FIELDS, row, strict=True)) for rows in packed for row in rows]
    assert Counter((r["topic"], r["partition"]) for r in rows) == Counter(
        (t, p) for t, n in topics.items() for p in range(n)
    )
    first = next(r for r in rows if (r["topic"], r["partition"]) == ("big", 0))
    assert first == {
        "topic": "big",
        "partition": 0,
        "start": EARLIEST,
        "end": OPEN,
        "remote_topic": "A.big",
        "max_message_bytes": 5_000_000,
        "source_cluster_id": "src-id",
        "target_cluster_id": "dst-id",
        "log_end": 42,
        "topic_id": "",
    }
    other = next(r for r in rows if r["topic"] == "small")
    assert other["max_message_bytes"] == 1048588 and other["log_end"] == -1
    # The heavy partition has a bin to itself; every partition's bin is remembered.
    heavy = next(i for i, rows in enumerate(packed) if any(r[:2] == ("big", 0) for r in rows))
    assert [r[:2] for r in packed[heavy]] == [("big", 0)]
    assert previous == {(r[0], r[1]): index for index, rows in enumerate(packed) for r in rows}


def test_bins_are_sticky_from_one_lease_to_the_next() -> None:
    topics = {"t": 8}
    previous: dict[TP, int] = {}
    first = _rows(topics, {}, 2, previous)
    remembered = dict(previous)
    second = _rows(topics, {}, 2, previous)
    assert first == second and previous == remembered


def test_no_topics_no_bins() -> None:
    assert _rows({}, {}, 4, {}) == []


# --- the planner's reads ------------------------------------------------------------------

TOPICS = {f"t{i:03d}": 10 for i in range(100)}  # 1,000 partitions


class CountingManager:
    """Stands in for TopicManager: the flow's topics, and the source's ends, counted."""

    def __init__(self) -> None:
        self.policy = policy_for(FlowConfig(source="A", target="B").policy, "A")
        self.end_reads: list[tuple[str, int]] = []

    def cluster_ids(self) -> tuple[str, str]:
        return ("source-id", "target-id")

    def sync(self) -> dict[str, RemoteTopic]:
        return {t: RemoteTopic(t, f"A.{t}", n, 1048588) for t, n in TOPICS.items()}

    def end_offsets(self, topics: dict[str, int], which: str = "latest") -> dict[TP, int]:
        self.end_reads.append((which, sum(topics.values())))
        return {(t, p): 100 + p for t, n in topics.items() for p in range(n)}


# Every partition's position asked once, in the batches a committed-offsets read is split into.
ONE_READ_OF_EVERY_PARTITION = [MAX_PARTITIONS_PER_COMMITTED_READ] * (
    1000 // MAX_PARTITIONS_PER_COMMITTED_READ
)


class CountingConsumer:
    """Stands in for the flow's progress consumer on the target: positions, counted."""

    def __init__(self, fail: bool = False) -> None:
        self.reads: list[int] = []
        self.fail = fail

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self.reads.append(len(partitions))
        if self.fail:
            raise KafkaException("the target does not answer")
        # t000 has copied everything, the others nothing yet.
        return [
            TopicPartition(
                tp.topic, tp.partition, 100 + tp.partition if tp.topic == "A.t000" else -1001
            )
            for tp in partitions
        ]

    def close(self) -> None:
        pass


@pytest.fixture
def planner(tmp_path: Path) -> tuple[Planner, CountingManager]:
    flow = FlowConfig(source="A", target="B", enabled=True)
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    planner = Planner(FlowSpec.of(config, flow, leased=True))
    manager = CountingManager()
    planner._manager = manager  # type: ignore[assignment]
    planner._source_admin = TopicIdAdmin()  # type: ignore[assignment]
    return planner, manager


def _consumer(monkeypatch: pytest.MonkeyPatch, consumer: CountingConsumer) -> None:
    monkeypatch.setattr(worker_clients, "consumer_for", lambda settings: consumer)


def _plan(planner: Planner, start: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    end = planner.latestOffset(start, planner.getDefaultReadLimit())
    return end, list(planner.partitions(start, end))


def test_one_lease_plan_reads_each_cluster_once_and_the_counters_once(
    planner: tuple[Planner, CountingManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, manager = planner
    consumer = CountingConsumer()
    _consumer(monkeypatch, consumer)
    stats_reads = []
    real_stats = FlowState.stats

    def counted_stats(state: FlowState) -> dict[str, Any]:
        stats_reads.append(1)
        return real_stats(state)

    monkeypatch.setattr(FlowState, "stats", counted_stats)
    start: dict[str, Any] = {"lease": 0, "topics": {}}
    for lease in (1, 2, 3):
        manager.end_reads.clear()
        consumer.reads.clear()
        stats_reads.clear()
        end, bins = _plan(reader, start)
        assert end == {"lease": lease, "topics": TOPICS}
        assert manager.end_reads == [("latest", 1000)]
        assert consumer.reads == ONE_READ_OF_EVERY_PARTITION
        assert len(stats_reads) == 1
        assert sum(len(b.rows) for b in bins) == 1000
        start = end
    # The lags read on the target weigh the bins: t000 copied everything, so its partitions
    # weigh 1 and the rest 100 + p + 1: the bins stay balanced.
    loads = [sum(1 if r[0] == "t000" else 101 + r[1] for r in b.rows) for b in bins]
    assert len(bins) == 2 and abs(loads[0] - loads[1]) <= 110
    latest = FlowState(reader.spec.state_dir).latest()
    assert len(latest) == 1000 and latest["t005:3"] == 103


def test_a_target_that_does_not_answer_leaves_placement_to_the_counters(
    planner: tuple[Planner, CountingManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, manager = planner
    _consumer(monkeypatch, CountingConsumer(fail=True))
    state = FlowState(reader.spec.state_dir)
    state.directory.mkdir(parents=True)
    (state.directory / "stats.json").write_text(
        json.dumps({"partitions": {"t001:0": {"records": 5, "bytes": 50, "position": 100}}})
    )
    end, bins = _plan(reader, {"lease": 0, "topics": {}})
    assert end["lease"] == 1 and sum(len(b.rows) for b in bins) == 1000
    assert manager.end_reads == [("latest", 1000)]
    # The counters' lags: the source's ends just written, less the counted positions.
    assert reader._lease_lags[("t001", 0)] == 0 and reader._lease_lags[("t001", 1)] == 101


def test_a_replayed_lease_reads_the_ends_and_positions_it_plans_with(
    planner: tuple[Planner, CountingManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted query replays a lease planned by an earlier planner: `partitions` alone."""
    reader, manager = planner
    consumer = CountingConsumer()
    _consumer(monkeypatch, consumer)
    bins = reader.partitions({"lease": 4, "topics": TOPICS}, {"lease": 5, "topics": TOPICS})
    assert manager.end_reads == [("latest", 1000)] and consumer.reads == ONE_READ_OF_EVERY_PARTITION
    log_ends = {(r[0], r[1]): r[8] for b in bins for r in b.rows}
    assert log_ends[("t003", 7)] == 107 and len(log_ends) == 1000


def test_whole_flow_plans_one_lease_without_spark(
    planner: tuple[Planner, CountingManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    reader, manager = planner
    consumer = CountingConsumer()
    _consumer(monkeypatch, consumer)
    rows = reader.whole_flow()
    assert len(rows) == 1000 and {r[2:4] for r in rows} == {(EARLIEST, OPEN)}
    assert manager.end_reads == [("latest", 1000)] and consumer.reads == ONE_READ_OF_EVERY_PARTITION


def _eos_planner(tmp_path: Path, *, leased: bool) -> Planner:
    flow = FlowConfig(
        source="A", target="B", enabled=True, exactly_once_source_support="enabled", bins=3
    )
    config = FerryConfig(
        clusters={a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:1") for a in "AB"},
        flows=(flow,),
        state_dir=tmp_path,
    )
    planner = Planner(FlowSpec.of(config, flow, leased=leased))
    planner._manager = CountingManager()  # type: ignore[assignment]
    planner._source_admin = TopicIdAdmin()  # type: ignore[assignment]
    return planner


@pytest.mark.parametrize("leased", [True, False], ids=["leases", "batches"])
def test_two_exactly_once_runs_planning_apart_put_each_partition_in_the_same_bin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leased: bool
) -> None:
    """A paused run woken beside its successor: two planners, two state directories, one
    with counters of its own (what it carried weighs its bins when packed by load)."""
    _consumer(monkeypatch, CountingConsumer())
    woken, successor = (_eos_planner(tmp_path / name, leased=leased) for name in ("w", "s"))
    woken.state.directory.mkdir(parents=True)
    (woken.state.directory / "stats.json").write_text(
        json.dumps({"partitions": {"t001:0": {"records": 90_000, "bytes": 9e6, "position": 9}}})
    )

    def bins_of(planner: Planner) -> dict[TP, int]:
        if leased:
            _end, bins = _plan(planner, planner.initialOffset())
        else:  # a batch of every partition from 0 to 100 + p
            ends = {(t, p): 100 + p for t, n in TOPICS.items() for p in range(n)}
            bins = planner._partitions(dict.fromkeys(ends, 0), ends)
        assert [b.index for b in bins] == list(range(len(bins)))  # a bin's index is its slot
        return {(r[0], r[1]): b.index for b in bins for r in b.rows}

    placed = bins_of(woken)
    assert len(placed) == 1000 and placed == bins_of(successor)
    assert set(placed.values()) == {0, 1, 2}
