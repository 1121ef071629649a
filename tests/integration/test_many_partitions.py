"""10,000 partitions copied by one `ferry run --once`: 1,000 topics of 10 partitions each.

A KRaft controller creates at most 10,000 partitions per request, and the remote topics of
such a source are more than that with their metadata records: the run must create them in
batches, wait until the target's broker knows every one, and copy every record. The pair of
clusters is this module's own (the session's pair keeps its few topics), each broker with 1 GiB
of heap. A small backlog, 3 records in each of 1,000 topics, is counted per partition on both
sides: every partition of B's copy holds exactly as many records as A's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, batches, submit
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import exact_producer, wait_for
from tests.integration.replication_setup import run_once, write_config

pytestmark = [pytest.mark.integration, pytest.mark.scale, pytest.mark.timeout(480)]

TOPICS = 1_000
PARTITIONS = 10
RECORDS_PER_TOPIC = 3
NAMES = [f"s{i:04d}" for i in range(TOPICS)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """A and B of this module: 10,000 partitions on each, more than the session's brokers
    are sized for."""
    directory = tmp_path_factory.mktemp("kafka-scale")
    brokers = local.up(["A", "B"], directory, heap="1g")
    try:
        yield brokers
    finally:
        local.down(directory)


def _counts(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """Records per partition (end minus start) of every partition of `topics`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = [TopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
    ends: dict[str, dict[tuple[str, int], int]] = {}
    for which, spec in (("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())):  # type: ignore[no-untyped-call]

        def send(batch: list[TopicPartition], spec: Any = spec) -> dict[Any, Any]:
            return admin.list_offsets(
                dict.fromkeys(batch, spec),
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=60,
            )

        futures = submit(send, partitions, MAX_OFFSETS_PARTITIONS_PER_REQUEST)
        ends[which] = {(tp.topic, tp.partition): f.result(90).offset for tp, f in futures.items()}
    return {tp: ends["end"][tp] - ends["start"][tp] for tp in ends["end"]}


def _source_with_backlog(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for batch in batches(NAMES, 500):  # 5,000 partitions per request: under the controller's limit
        futures = admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in batch])
        for future in futures.values():
            future.result(120)

    def led() -> bool:
        topics = admin.list_topics(timeout=30).topics
        return all(
            n in topics
            and len(topics[n].partitions) == PARTITIONS
            and all(p.leader >= 0 for p in topics[n].partitions.values())
            for n in NAMES
        )

    # The controller answers before the broker leads all 10,000 new partitions: a record for
    # one it does not lead yet would be refused as UNKNOWN_TOPIC_OR_PART.
    wait_for(led, 180, f"A's broker leads every partition of the {TOPICS} new topics")
    # A broker loading 10,000 partitions can hold a produce request past its timeout and
    # still append it: the retry must not write the records twice (exact_producer).
    producer = exact_producer(bootstrap, {"linger.ms": 20, "request.timeout.ms": 120_000})
    pending = {(name, k) for name in NAMES for k in range(RECORDS_PER_TOPIC)}

    def delivered() -> bool:
        """One round: every pending record produced and flushed; refused ones stay pending
        (a partition the broker still loads answers UNKNOWN_TOPIC_OR_PART)."""
        refused: set[tuple[str, int]] = set()
        unexpected: list[Any] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                return
            if err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                unexpected.append(err)
            refused.add((msg.topic(), msg.partition()))

        for name, k in sorted(pending):
            producer.produce(
                name,
                key=f"k{k}".encode(),
                value=f"{name}-{k}".encode(),
                partition=k,
                on_delivery=on_delivery,
            )
            producer.poll(0)
        assert producer.flush(300) == 0, "the backlog was not all delivered within 300 s"
        assert unexpected == []
        pending.intersection_update(refused)
        return not pending

    wait_for(delivered, 180, f"{RECORDS_PER_TOPIC} records in each topic of A")


def test_ten_thousand_partitions_copied_by_one_run(
    pair: dict[str, LocalCluster], spark: Any, tmp_path: Path
) -> None:
    a, b = pair["A"].bootstrap, pair["B"].bootstrap
    _source_with_backlog(a)
    wanted = _counts(a, NAMES)
    assert sum(wanted.values()) == TOPICS * RECORDS_PER_TOPIC

    config = write_config(tmp_path, pair, topics="s[0-9]+")
    progress = run_once(config, spark)["A->B"]
    assert progress.records == TOPICS * RECORDS_PER_TOPIC

    remote = [f"A.{n}" for n in NAMES]
    metadata = AdminClient({"bootstrap.servers": b}).list_topics(timeout=60).topics
    partitions = {name: len(metadata[name].partitions) for name in remote if name in metadata}
    assert partitions == dict.fromkeys(remote, PARTITIONS)

    # Every partition's count on B equals A's: per topic, and per partition number.
    got: dict[tuple[str, int], int] = {}

    def all_copied() -> bool:
        got.update(_counts(b, remote))
        return all(got[(f"A.{t}", p)] == n for (t, p), n in wanted.items())

    wait_for(all_copied, 60, "B's copy of every partition holds as many records as A's")
    per_topic_a = {t: sum(wanted[(t, p)] for p in range(PARTITIONS)) for t in NAMES}
    per_topic_b = {t: sum(got[(f"A.{t}", p)] for p in range(PARTITIONS)) for t in NAMES}
    assert per_topic_b == per_topic_a
