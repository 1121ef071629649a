"""Source faults without a broker: lost ranges kept and worded, topic ids compared."""

from __future__ import annotations

from ferry.config import FlowConfig
from ferry.engine.copy.progress import progress_offset, topic_id_of
from ferry.engine.flow_query import lost_notices
from ferry.engine.flow_state import _add_lost, lost_ranges
from ferry.engine.plan.topic_ids import changed_topics


def test_a_changed_topic_id_is_named_with_both_ids_and_an_unknown_one_never_counts() -> None:
    committed = {("a", 0): (50, "old"), ("a", 1): (7, "old"), ("b", 0): (3, ""), ("c", 0): (1, "x")}
    current = {"a": "new", "b": "other", "c": "x"}
    assert changed_topics(committed, current) == {"a": ("old", "new")}
    assert changed_topics(committed, {}) == {}


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
