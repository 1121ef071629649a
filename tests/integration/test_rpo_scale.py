"""The recovery point objective of 10,000 lagging partitions: one bounded read.

1,000 topics of 10 partitions on A, one record in each partition, nothing copied: every
partition lags from offset 0. The ends (in batches) and the first record of each partition
(one consumer, one record each) are read within `ferry status`'s bound, and every partition's
RPO is known and at least its record's age. The pair of clusters is this module's own, sized
as test_many_partitions' is.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.config.model import ClusterConfig
from ferry.kafka.admin_batches import batches
from ferry.kafka.rpo_probe import last_stable_offsets, read_rpos
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from ferry.ops.status import RPO_READ_SECONDS
from tests.integration.kafka_helpers import exact_producer, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.scale, pytest.mark.timeout(480)]

TOPICS = 1_000
PARTITIONS = 10
NAMES = [f"r{i:04d}" for i in range(TOPICS)]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("kafka-rpo-scale")
    brokers = local.up(["A"], directory, heap="1g")
    try:
        yield brokers["A"]
    finally:
        local.down(directory)


def _one_record_per_partition(bootstrap: str, stamp_ms: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for batch in batches(NAMES, 500):  # 5,000 partitions per request: under the controller's limit
        for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in batch]).values():
            future.result(120)

    def led() -> bool:
        topics = admin.list_topics(timeout=30).topics
        return all(
            n in topics
            and len(topics[n].partitions) == PARTITIONS
            and all(p.leader >= 0 for p in topics[n].partitions.values())
            for n in NAMES
        )

    wait_for(led, 180, f"A's broker leads every partition of the {TOPICS} new topics")
    # A broker loading 10,000 partitions can hold a produce request past its timeout and
    # still append it: the retry must not write the records twice (exact_producer).
    producer = exact_producer(bootstrap, {"linger.ms": 20, "request.timeout.ms": 120_000})
    pending = {(name, p) for name in NAMES for p in range(PARTITIONS)}

    def delivered() -> bool:
        refused: set[tuple[str, int]] = set()

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
                refused.add((msg.topic(), msg.partition()))

        for name, p in sorted(pending):
            producer.produce(name, b"v", partition=p, timestamp=stamp_ms, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(300) == 0
        pending.intersection_update(refused)
        return not pending

    wait_for(delivered, 180, "a record in every partition of A")


def test_ten_thousand_lagging_partitions_are_read_within_the_bound(source: LocalCluster) -> None:
    stamp_ms = int(time.time() * 1000) - 60_000
    _one_record_per_partition(source.bootstrap, stamp_ms)
    cluster = ClusterConfig(alias="A", bootstrap_servers=source.bootstrap)
    partitions = [(n, p) for n in NAMES for p in range(PARTITIONS)]

    began = time.monotonic()
    ends = last_stable_offsets(cluster, partitions, timeout=RPO_READ_SECONDS)
    read_ends = time.monotonic() - began
    assert ends == dict.fromkeys(partitions, 1)
    asked_ms = time.time() * 1000
    began = time.monotonic()
    rpos = read_rpos(cluster, {}, ends, timeout=RPO_READ_SECONDS)
    probed = time.monotonic() - began
    print(f"10,000 partitions: ends in {read_ends:.2f} s, first records in {probed:.2f} s")

    unknown = [tp for tp, rpo in rpos.items() if rpo is None]
    assert unknown == [], f"{len(unknown)} of 10,000 not read within {RPO_READ_SECONDS} s"
    assert min(r for r in rpos.values() if r is not None) >= (asked_ms - stamp_ms) / 1000
    assert probed < RPO_READ_SECONDS + 2  # the deadline, and closing the one consumer
