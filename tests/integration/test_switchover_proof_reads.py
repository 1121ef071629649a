"""The switchover proof's reads: one consumer reads the records' ids partition after partition
(a window over 10,000 partitions was 10,000 consumers, a third of a switchover's time)."""

from __future__ import annotations

import pytest

from ferry.config.model import ClusterConfig
from ferry.control.switchover import _IdReader
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce

pytestmark = pytest.mark.integration


def test_one_reader_reads_each_partition_s_window_and_nothing_of_another(
    kafka_clusters: dict[str, LocalCluster], topic_name: str
) -> None:
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic_name, partitions=3)
    # Partition 0: records written on A (their own place is their id); partition 1: copies
    # of records from C (their origin header is); partition 2: none.
    copied = [Origin("cluster-c", "C", "orders", 1, 100 + i).to_bytes() for i in range(10)]
    produce(
        a,
        topic_name,
        [Rec(0, None, f"a{i}".encode(), (), 1_700_000_000_000 + i) for i in range(10)]
        + [Rec(1, None, b"c", ((ORIGIN_HEADER, origin),), 1_700_000_000_000) for origin in copied],
    )
    reader = _IdReader(ClusterConfig(alias="A", bootstrap_servers=a), "A")
    try:
        assert reader.read(topic_name, 0, 2, 7) == [("A", topic_name, 0, o) for o in range(2, 7)]
        assert reader.read(topic_name, 1, 5, None) == [
            ("C", "orders", 1, 100 + i) for i in range(5, 10)
        ]
        assert reader.read(topic_name, 2, 0, None) == []
        assert reader.read(topic_name, 0, 8, 50) == [
            ("A", topic_name, 0, 8),
            ("A", topic_name, 0, 9),
        ]
        assert reader.read(topic_name, 0, 10, 10) == []
    finally:
        reader.close()
