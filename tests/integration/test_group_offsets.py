"""A group's committed offsets, read through a consumer of the group (kafka/group_offsets.py),
against a real broker: what the group committed, by partition, for the partitions asked or
every partition of the topics named; a group never seen reads as nothing; the group gains no
member by being read."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient

from ferry.config.model import ClusterConfig
from ferry.kafka.group_offsets import read_group_offsets
from ferry.local.cluster import LocalCluster
from tests.integration.group_helpers import commit_group
from tests.integration.kafka_helpers import create_topic


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
