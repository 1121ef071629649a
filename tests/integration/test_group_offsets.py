"""A group's committed offsets, read and committed through a consumer of the group
(kafka/group_offsets.py), against a real broker: what the group committed, by partition, for
the partitions asked or every partition of the topics named; a group never seen reads as
nothing; the group gains no member by being read; GroupAdmin's commit (a consumer's, or the
admin API's) is read back as committed, and refused (GroupActiveError, nothing committed)
while the group has a member."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from ferry.config.model import ClusterConfig
from ferry.kafka.group_offsets import read_group_offsets
from ferry.local.cluster import LocalCluster
from ferry.offsets.groups import GroupActiveError, GroupAdmin
from tests.integration.group_helpers import commit_group
from tests.integration.kafka_helpers import create_topic, wait_for


def test_what_a_group_committed_is_read_by_partition(
    kafka_clusters: dict[str, LocalCluster],
) -> None:
    bootstrap = kafka_clusters["A"].bootstrap
    cluster = ClusterConfig(alias="A", bootstrap_servers=bootstrap)
    tag = uuid.uuid4().hex[:8]
    topic, other, group = f"offsets-{tag}", f"offsets-other-{tag}", f"group-{tag}"
    create_topic(bootstrap, topic, 3)
    create_topic(bootstrap, other, 1)
    commit_group(bootstrap, group, {(topic, 0): 5, (topic, 2): 7, (other, 0): 1})

    assert read_group_offsets(cluster, group, [(topic, 0), (topic, 1)]) == {(topic, 0): 5}
    assert read_group_offsets(cluster, group, topics={topic}) == {(topic, 0): 5, (topic, 2): 7}
    everything = read_group_offsets(cluster, group)
    assert {tp: o for tp, o in everything.items() if tag in tp[0]} == {
        (topic, 0): 5,
        (topic, 2): 7,
        (other, 0): 1,
    }
    assert read_group_offsets(cluster, f"never-{tag}", topics={topic}) == {}

    # Read, not joined: the group still has no members.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert not described.members


@pytest.mark.parametrize("admin_commits", [False, True], ids=["consumer", "admin-api"])
def test_a_commit_is_read_back_and_refused_while_the_group_has_a_member(
    kafka_clusters: dict[str, LocalCluster], admin_commits: bool
) -> None:
    bootstrap = kafka_clusters["B"].bootstrap
    cluster = ClusterConfig(alias="B", bootstrap_servers=bootstrap)
    tag = uuid.uuid4().hex[:8]
    topic, idle, busy = f"commits-{tag}", f"idle-{tag}", f"busy-{tag}"
    create_topic(bootstrap, topic, 2)
    admin = GroupAdmin(cluster, timeout=30, admin_commits=admin_commits)

    admin.commit(idle, {(topic, 0): 3, (topic, 1): 9})
    assert read_group_offsets(cluster, idle, topics={topic}) == {(topic, 0): 3, (topic, 1): 9}
    admin.commit(idle, {(topic, 1): 4})  # a commit sets, it does not only move forward
    assert read_group_offsets(cluster, idle, topics={topic}) == {(topic, 0): 3, (topic, 1): 4}

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": busy})
    member.subscribe([topic])
    try:
        wait_for(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "a member")
        with pytest.raises(GroupActiveError, match=f"cluster B: group {busy} has active members"):
            admin.commit(busy, {(topic, 0): 1})
    finally:
        member.close()
    assert read_group_offsets(cluster, busy, topics={topic}) == {}
