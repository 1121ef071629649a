"""Source faults without a broker: lost ranges kept and worded, topic ids compared."""

from __future__ import annotations

from ferry.config import FlowConfig
from ferry.engine.copy.progress import progress_offset, topic_id_of
from ferry.engine.flow_query import lost_notices
from ferry.engine.flow_state import _add_lost, lost_ranges
from ferry.engine.plan.topic_ids import changed_partitions, ends_in_new_topics


def test_a_changed_topic_id_is_named_with_both_ids_and_an_unknown_one_never_counts() -> None:
    committed = {("a", 0): (50, "old"), ("a", 1): (7, "old"), ("b", 0): (3, ""), ("c", 0): (1, "x")}
    current = {"a": "new", "b": "other", "c": "x"}
    assert changed_partitions(committed, current) == {
        ("a", 0): ("old", "new"),
        ("a", 1): ("old", "new"),
    }
    assert changed_partitions(committed, {}) == {}


def test_a_partition_already_committed_with_the_new_id_is_no_change() -> None:
    # Partition 0 is copying the new topic already; only partition 1 is still in the old one.
    committed = {("a", 0): (20, "new"), ("a", 1): (30, "old")}
    assert changed_partitions(committed, {"a": "new"}) == {("a", 1): ("old", "new")}


def test_a_bounded_batch_moves_each_partition_of_a_new_topic_to_its_own_position() -> None:
    start = {("a", 0): 30, ("a", 1): 30, ("a", 2): 30, ("b", 0): 9}
    committed = {("a", 0): (20, "new"), ("a", 1): (30, "old"), ("b", 0): (9, "b1")}
    changed = changed_partitions(committed, {"a": "new", "b": "b1"})
    # 0: copying the new topic already, at 20; 1: in the old topic; 2: never committed; b: same.
    assert ends_in_new_topics(start, committed, changed) == {
        ("a", 0): 20,
        ("a", 1): 0,
        ("a", 2): 0,
    }
    assert ends_in_new_topics(start, committed, {}) == {}


def test_the_topic_id_travels_as_commit_metadata() -> None:
    tp = progress_offset("A.t", 0, 5, "abc")
    assert (tp.offset, topic_id_of(tp.metadata)) == (5, "abc")
    assert topic_id_of(progress_offset("A.t", 0, 5, "").metadata) == ""
    assert topic_id_of("something else") == ""


def test_lost_ranges_join_when_they_touch_and_keep_the_newest() -> None:
    ranges = _add_lost([], [100, 149], 50)
    ranges = _add_lost(ranges, [150, 159], 10)
    ranges = _add_lost(ranges, [300, 300], 1)
    assert ranges == [[100, 159, 60], [300, 300, 1]]
    assert lost_ranges({"lost": ranges}) == "100..159, 300"
    many: list[list[int]] = []
    for i in range(30):
        many = _add_lost(many, [i * 10, i * 10 + 1], 2)
    assert len(many) == 20 and many[0][0] == 0 and sum(r[2] for r in many) == 60


def test_each_new_gap_is_said_once_with_cluster_topic_partition_and_offsets() -> None:
    flow = FlowConfig(source="A", target="B")
    said: dict[str, int] = {}
    stats = {"partitions": {"t:0": {"expired": 50, "lost": [[100, 149, 50]]}}}
    [line] = lost_notices(flow, stats, {}, said)
    assert "50 record(s) lost" in line
    assert "cluster A, topic t, partition 0: offsets 100..149" in line
    assert lost_notices(flow, stats, {}, said) == []
    stats["partitions"]["t:0"] = {"expired": 60, "lost": [[100, 149, 50], [200, 209, 10]]}
    [line] = lost_notices(flow, stats, {}, said)
    assert "10 record(s) lost" in line and "offsets 200..209" in line
