"""Consumer timestamps on real brokers: record on A, mirror to B, translate on B by timestamp."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from ferry.local.cluster import LocalCluster
from ferry.offsets.consumer_timestamps import (
    CONSUMER_TIMESTAMPS_TOPIC,
    ConsumerTimestampsRecorder,
    TimestampMirror,
    TimestampPosition,
    offsets_for_timestamps,
    read_group_timestamps,
)
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for

pytestmark = pytest.mark.integration

# Recent: records stamped years ago are deleted by retention (7 days) at the broker's next
# retention check, which made this test fail whenever that check came mid-test.
T0 = int(time.time() * 1000) - 3_600_000
PARTITIONS = 2


def _records() -> list[Rec]:
    """50 records over 2 partitions, timestamps strictly increasing (10 ms apart)."""
    return [
        Rec(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), (), T0 + 10 * i) for i in range(50)
    ]


def _config(broker: LocalCluster) -> dict[str, str]:
    return {"bootstrap.servers": broker.bootstrap}


@pytest.fixture
def group_consumer(kafka_clusters: dict[str, LocalCluster]) -> Iterator[tuple[str, Consumer]]:
    group = f"G-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_clusters["A"].bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        yield group, consumer
    finally:
        consumer.close()


def _consume(consumer: Consumer, count: int) -> list[Message]:
    """Exactly `count` records, polling until they arrived."""
    got: list[Message] = []

    def more() -> bool:
        for msg in consumer.consume(count - len(got), 0.5):
            assert msg.error() is None, msg.error()
            got.append(msg)
        return len(got) == count

    wait_for(more, 30, f"{count} records consumed (got {len(got)})")
    return got


def _last_consumed(messages: list[Message]) -> dict[int, tuple[int, int]]:
    """Per partition: (offset, timestamp) of the last consumed record."""
    last: dict[int, tuple[int, int]] = {}
    for msg in messages:
        p, offset = msg.partition(), msg.offset()
        assert p is not None and offset is not None
        if p not in last or offset > last[p][0]:
            last[p] = (offset, msg.timestamp()[1])
    return last


def _record_30(
    a: LocalCluster, topic: str, group_consumer: tuple[str, Consumer], ts_topic: str
) -> dict[int, tuple[int, int]]:
    """Produce 50 records to `topic` on A; group G consumes 30 and commits through a
    recorder writing to `ts_topic`. Returns the last consumed (offset, timestamp) per partition."""
    create_topic(a.bootstrap, topic, partitions=PARTITIONS)
    produce(a.bootstrap, topic, _records())
    group, consumer = group_consumer
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    messages = _consume(consumer, 30)
    last = _last_consumed(messages)
    assert sorted(last) == [0, 1], "both partitions must have been consumed from"

    with ConsumerTimestampsRecorder(_config(a), group=group, topic=ts_topic) as recorder:
        recorded = recorder.commit(consumer, messages)

    expected = {(topic, p): TimestampPosition(o + 1, ts) for p, (o, ts) in last.items()}
    assert recorded == expected
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    assert {(tp.topic, tp.partition): tp.offset for tp in committed} == {
        k: pos.offset for k, pos in expected.items()
    }
    return last


def _describe(bootstrap: str, topic: str) -> tuple[int, str]:
    """(partition count, cleanup.policy) of a topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs: Any = admin.describe_configs([resource])[resource].result(10)
    return partitions, configs["cleanup.policy"].value


def test_record_on_a_then_translate_by_timestamp_on_b(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    group_consumer: tuple[str, Consumer],
) -> None:
    a, b = kafka_clusters["A"], kafka_clusters["B"]
    ts_topic = f"__consumer_timestamps-{topic_name}"
    last = _record_30(a, topic_name, group_consumer, ts_topic)
    group = group_consumer[0]

    assert _describe(a.bootstrap, ts_topic) == (1, "compact")
    positions = read_group_timestamps(_config(a), group, topic=ts_topic)
    assert positions == {
        (topic_name, p): TimestampPosition(o + 1, ts) for p, (o, ts) in last.items()
    }
    assert read_group_timestamps(_config(a), f"{group}-other", topic=ts_topic) == {}

    # B holds the same records with the same timestamps (as replication would copy them).
    copy = f"{topic_name}-copy"
    create_topic(b.bootstrap, copy, partitions=PARTITIONS)
    produce(b.bootstrap, copy, _records())
    translated = offsets_for_timestamps(
        _config(b), {(copy, p): pos.timestamp for (_, p), pos in positions.items()}
    )
    # >= the last consumed record's timestamp: that one record is delivered again, no more.
    assert translated == {(copy, p): o for p, (o, _) in last.items()}

    beyond = offsets_for_timestamps(_config(b), {(copy, 0): T0 + 10**6, (copy, 1): T0})
    assert beyond == {(copy, 0): 25, (copy, 1): 0}  # partition 0's end; partition 1's first


def test_mirror_copies_the_timestamps_to_b(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    group_consumer: tuple[str, Consumer],
) -> None:
    a, b = kafka_clusters["A"], kafka_clusters["B"]
    ts_topic = f"__consumer_timestamps-{topic_name}"
    mirror_topic = f"__consumer_timestamps-{topic_name}-on-b"
    mirror = TimestampMirror(_config(a), _config(b), mirror_topic, source_topic=ts_topic)
    try:
        assert mirror.sync() == 0  # nothing recorded yet: the source topic does not exist
        last = _record_30(a, topic_name, group_consumer, ts_topic)
        group = group_consumer[0]

        assert mirror.sync() == PARTITIONS  # one record per partition
        on_a = read_group_timestamps(_config(a), group, topic=ts_topic)
        assert read_group_timestamps(_config(b), group, topic=mirror_topic) == on_a
        assert on_a == {
            (topic_name, p): TimestampPosition(o + 1, ts) for p, (o, ts) in last.items()
        }
        assert _describe(b.bootstrap, mirror_topic) == (1, "compact")
        assert mirror.sync() == 0  # no new commits, nothing copied again

        # A later commit on one partition only reaches B with the next sync. The 30 records
        # consumed may have emptied one partition (25 each), so read on from the fuller one.
        # A consumer of its own in the group, assigned one partition from the start: nothing
        # fetched ahead under the first assignment (both partitions) can reach the commit.
        later = min(last, key=lambda p: last[p][0])
        other = 1 - later
        again = Consumer(
            {
                "bootstrap.servers": a.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
            }
        )
        try:
            again.assign([TopicPartition(topic_name, later, last[later][0] + 1)])
            more = _consume(again, 3)
            assert {m.partition() for m in more} == {later}, "read on from one partition only"
            with ConsumerTimestampsRecorder(_config(a), group=group, topic=ts_topic) as recorder:
                recorder.commit(again, more)
        finally:
            again.close()
        assert mirror.sync() == 1
        moved = read_group_timestamps(_config(b), group, topic=mirror_topic)
        offset, ts = _last_consumed(more)[later]
        assert moved[(topic_name, later)] == TimestampPosition(offset + 1, ts)
        assert moved[(topic_name, other)] == on_a[(topic_name, other)]
    finally:
        mirror.close()


def test_default_topic_and_missing_topics(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    group_consumer: tuple[str, Consumer],
) -> None:
    a = kafka_clusters["A"]
    missing = f"__consumer_timestamps-{topic_name}-never"
    assert read_group_timestamps(_config(a), "G", topic=missing) == {}

    # The default topic is shared by every test of the session; the group is unique.
    last = _record_30(a, topic_name, group_consumer, CONSUMER_TIMESTAMPS_TOPIC)
    positions = read_group_timestamps(_config(a), group_consumer[0])
    assert positions == {
        (topic_name, p): TimestampPosition(o + 1, ts) for p, (o, ts) in last.items()
    }
    assert _describe(a.bootstrap, CONSUMER_TIMESTAMPS_TOPIC)[1] == "compact"
