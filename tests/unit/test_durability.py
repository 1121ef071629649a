"""`ferry doctor`'s rules: when a target cannot keep what it acknowledged."""

from __future__ import annotations

import pytest

from ferry.ops.durability import TopicFacts, exit_code, judge_producer, judge_topic


def kinds(rf: int, **configs: str) -> list[str]:
    facts = TopicFacts("B", "A.orders", rf, {k.replace("_", "."): v for k, v in configs.items()})
    return [f.kind for f in judge_topic(facts)]


def test_healthy_topic_gets_no_warning() -> None:
    assert kinds(3, min_insync_replicas="2", unclean_leader_election_enable="false") == []
    assert kinds(5, min_insync_replicas="3") == []
    assert kinds(3) == []  # configs unknown: only what was read is judged


def test_one_replica_is_flagged() -> None:
    assert kinds(1, min_insync_replicas="1") == ["replication-factor"]


@pytest.mark.parametrize("rf", [3, 4])
def test_min_insync_below_two_with_three_replicas_is_flagged(rf: int) -> None:
    assert kinds(rf, min_insync_replicas="1") == ["min-insync-replicas"]


def test_min_insync_one_with_two_replicas_is_not_the_rf3_rule() -> None:
    assert kinds(2, min_insync_replicas="1") == []


def test_min_insync_above_replicas_refuses_every_write() -> None:
    assert kinds(2, min_insync_replicas="3") == ["min-insync-replicas"]


def test_unclean_leader_election_is_flagged() -> None:
    assert kinds(3, min_insync_replicas="2", unclean_leader_election_enable="true") == [
        "unclean-leader-election"
    ]


def test_every_finding_names_cluster_topic_and_says_why_in_one_sentence() -> None:
    facts = TopicFacts("B", "A.orders", 1, {"unclean.leader.election.enable": "true"})
    for f in judge_topic(facts):
        assert (f.cluster, f.topic) == ("B", "A.orders")
        assert f.detail.count(". ") == 0 and len(f.detail) > 40
        assert set(f.to_json()) == {"kind", "cluster", "topic", "detail", "severity"}


def test_producer_settings_weaker_than_acks_all_with_idempotence() -> None:
    assert judge_producer("B", {"acks": "all", "enable.idempotence": "true"}) == []
    assert judge_producer("B", {"acks": "-1"}) == []
    assert judge_producer("B", {}) == []
    weak = judge_producer("B", {"request.required.acks": "1", "enable.idempotence": "false"})
    assert [f.kind for f in weak] == ["producer-acks", "producer-idempotence"]
    assert all(f.cluster == "B" and f.topic is None for f in weak)


def test_what_stops_replication_is_an_error_and_what_weakens_it_a_warning() -> None:
    weak = judge_topic(TopicFacts("B", "A.orders", 1, {"unclean.leader.election.enable": "true"}))
    assert {f.severity for f in weak} == {"warning"}
    assert exit_code(weak) == 2
    refused = judge_topic(TopicFacts("B", "A.orders", 2, {"min.insync.replicas": "3"}))
    assert [(f.kind, f.severity) for f in refused] == [("min-insync-replicas", "error")]
    assert exit_code(weak + refused) == 1
    assert exit_code([]) == 0
