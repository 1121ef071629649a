"""Each group's partitions with an offset, read from a real broker's `__consumer_offsets`
(kafka/offsets_log_reader.py): plain and transactional commits are in it, a deleted group's
offsets are gone after the next refresh (which reads only what was written since), and an index that
cannot be read whole says why and answers nothing, so its callers ask every partition."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.config.model import ClusterConfig
from ferry.kafka.offsets_log_reader import OffsetsLogIndex
from ferry.local.cluster import LocalCluster
from tests.integration.group_helpers import commit_group
from tests.integration.kafka_helpers import create_topic


def _commit_in_a_transaction(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    metadata = _group_metadata(bootstrap, group)
    producer.send_offsets_to_transaction(offsets, metadata, 30)
    producer.commit_transaction(30)


def _group_metadata(bootstrap: str, group: str):  # type: ignore[no-untyped-def]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def test_groups_partitions_followed_through_commits_and_deletes(
    kafka_clusters: dict[str, LocalCluster],
) -> None:
    bootstrap = kafka_clusters["A"].bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, plain, transactional = f"index-{tag}", f"plain-{tag}", f"tx-{tag}"
    create_topic(bootstrap, topic, 4)
    commit_group(bootstrap, plain, {(topic, 0): 5, (topic, 2): 7})
    _commit_in_a_transaction(bootstrap, transactional, [TopicPartition(topic, 3, 11)])

    index = OffsetsLogIndex(ClusterConfig(alias="A", bootstrap_servers=bootstrap))
    try:
        assert index.partitions_of(plain) is None  # nothing read yet: no answer
        assert index.refresh(), index.unusable
        assert index.partitions_of(plain) == {(topic, 0), (topic, 2)}
        assert index.partitions_of(transactional) == {(topic, 3)}
        assert index.partitions_of(f"never-{tag}") is None

        # Deleting a group writes a tombstone for each of its offsets.
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.delete_consumer_groups([transactional]).values():
            future.result(30)
        commit_group(bootstrap, plain, {(topic, 1): 3})
        assert index.refresh(), index.unusable
        assert index.partitions_of(plain) == {(topic, 0), (topic, 1), (topic, 2)}
        assert index.partitions_of(transactional) == frozenset()
    finally:
        index.close()


def test_an_index_too_large_to_read_answers_nothing_and_says_why(
    kafka_clusters: dict[str, LocalCluster],
) -> None:
    bootstrap = kafka_clusters["A"].bootstrap
    tag = uuid.uuid4().hex[:8]
    topic, group = f"index-{tag}", f"group-{tag}"
    create_topic(bootstrap, topic, 1)
    commit_group(bootstrap, group, {(topic, 0): 1})
    index = OffsetsLogIndex(ClusterConfig(alias="A", bootstrap_servers=bootstrap), max_records=0)
    try:
        assert not index.refresh()
        assert index.unusable is not None
        assert "__consumer_offsets on cluster A" in index.unusable
        assert "worth reading" in index.unusable
        assert index.partitions_of(group) is None
    finally:
        index.close()
