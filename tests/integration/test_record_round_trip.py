"""Real brokers keep what replication must preserve: keys, null values, headers, timestamps."""

from __future__ import annotations

import pytest

from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, read_all

pytestmark = pytest.mark.integration


def _sample(partitions: int) -> list[Rec]:
    records = []
    for i in range(60):
        records.append(
            Rec(
                partition=i % partitions,
                key=None if i % 5 == 0 else f"k{i}".encode(),
                value=None if i % 7 == 0 else f"v{i}".encode() * (i % 3 + 1),
                # Duplicate header keys, in order, and a null header value.
                headers=(("h", b"1"), ("h", b"2"), ("n", None)) if i % 2 else (),
                timestamp=RECENT_MS + i,
            )
        )
    return records


@pytest.mark.parametrize("alias", ["A", "B"])
def test_records_round_trip_with_keys_nulls_headers_and_timestamps(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, alias: str
) -> None:
    bootstrap = kafka_clusters[alias].bootstrap
    create_topic(bootstrap, topic_name, partitions=3)
    sent = _sample(3)
    produce(bootstrap, topic_name, sent)

    got = read_all(bootstrap, topic_name, 3, len(sent))

    for p in range(3):
        assert [r for r in got if r.partition == p] == [r for r in sent if r.partition == p]


def test_clusters_are_independent(kafka_clusters: dict[str, LocalCluster], topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name)
    ids = {AdminClient({"bootstrap.servers": x}).list_topics(timeout=10).cluster_id for x in (a, b)}
    assert len(ids) == 2
    assert topic_name not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics
