"""Stored offsets (an application's own offset store) translated exactly by `ferry translate
--offsets`, checked record by record against real brokers.

A stored offset means "the next record to read". Its translation points at the copy of the
first record at or after it: for each of 1,000 random offsets of a topic whose log holds
compaction gaps, aborted transactions and transaction markers, the record at the translated
offset on B must be the copy (same key, value, and origin header naming that offset on A)
of the first record on A at or after the stored offset.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from ferry.client import Translated, translate_stored_offsets
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.compaction import wait_for_compaction
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for
from tests.integration.replication_setup import write_config

PARTITIONS = 2
Record = tuple[bytes | None, bytes | None, dict[str, bytes]]  # key, value, headers


def _read(bootstrap: str, topic: str, partition: int) -> dict[int, Record]:
    """Every record a read_committed consumer sees, by offset, up to the end of the log."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    records: dict[int, Record] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return records  # end of partition
            headers = {k: v for k, v in msg.headers() or () if v is not None}
            records[msg.offset()] = (msg.key(), msg.value(), headers)
        raise AssertionError(f"no end of {topic} partition {partition} in 30 s")
    finally:
        consumer.close()


def _transactions(bootstrap: str, topic: str) -> None:
    """Keyed records in transactions, every third aborted, on every partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{topic}"})
    producer.init_transactions(30)
    for txn in range(9):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(
                topic, f"txn-{txn}-{i}".encode(), key=f"k{i % 10}".encode(), partition=i % 2
            )
        if txn % 3 == 1:
            producer.flush(30)  # written before the abort, so the log holds them
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def _stop_cleaning(bootstrap: str, topic: str) -> None:
    """No segment rolls and no cleaning from now: what A holds must not change under us."""
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in {"segment.ms": "86400000", "min.cleanable.dirty.ratio": "0.99"}.items()
        ],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def _settled(bootstrap: str, topic: str) -> dict[int, dict[int, Record]]:
    reads = [{p: _read(bootstrap, topic, p) for p in range(PARTITIONS)}]

    def stable() -> bool:
        reads.append({p: _read(bootstrap, topic, p) for p in range(PARTITIONS)})
        return reads[-1] == reads[-2]

    wait_for(stable, 30, f"the contents of {topic} stop changing")
    return reads[-1]


def _first_at_or_after(held: dict[int, Record], offset: int) -> int:
    return min(o for o in held if o >= offset)


def test_stored_offsets_point_at_the_copy_of_the_first_record_at_or_after_them(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    compacted = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "0",
    }
    create_topic(a, topic_name, PARTITIONS, **compacted)
    produce(
        a,
        topic_name,
        [Rec(i % 2, f"k{i % 10}".encode(), f"v{i}".encode(), (), 0) for i in range(300)],
    )
    wait_for_compaction(a, topic_name)
    _stop_cleaning(a, topic_name)
    _transactions(a, topic_name)
    produce(a, topic_name, [Rec(p, b"last", b"last", (), 0) for p in range(PARTITIONS)])
    held = _settled(a, topic_name)
    for p in range(PARTITIONS):
        offsets = sorted(held[p])
        assert len(offsets) < offsets[-1] + 1, f"partition {p} has no gap: {offsets}"

    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    copied = run_ferry("run", "-c", str(config), "--once")
    assert copied.returncode == 0, copied.stderr
    assert _settled(a, topic_name) == held  # A did not change under the copy

    rng = random.Random(7)
    stored = [
        (p, rng.randint(0, max(held[p]))) for p in (rng.randrange(PARTITIONS) for _ in range(1000))
    ]
    # Gaps are sampled: compaction's at the front, aborted records and markers further on.
    assert sum(o not in held[p] for p, o in stored) > 100
    lines = [json.dumps({"topic": topic_name, "partition": p, "offset": o}) for p, o in stored]
    extra = [
        "{not json",
        json.dumps({"topic": "no-such-flow-topic", "partition": 0, "offset": 1}),
        json.dumps({"topic": topic_name, "partition": 0, "offset": max(held[0]) + 50}),
    ]
    offsets_file = tmp_path / "offsets.jsonl"
    offsets_file.write_text("\n".join(lines + extra) + "\n")

    result = run_ferry(
        "translate", "-c", str(config), "--offsets", str(offsets_file), "--from", "A", "--to",
        "B", "--json",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "3 of 1003 offset(s) could not be translated" in result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(answers) == 1003

    remote = f"A.{topic_name}"
    copies = {p: _read(b, remote, p) for p in range(PARTITIONS)}
    for (p, offset), answer in zip(stored, answers, strict=False):
        assert answer["topic"] == topic_name and answer["offset"] == offset, answer
        assert answer["remote_topic"] == remote and answer["remote_partition"] == p, answer
        first = _first_at_or_after(held[p], offset)
        key, value, _ = held[p][first]
        at = copies[p].get(answer["remote_offset"])
        assert at is not None, f"no record at {answer} on B"
        origin = Origin.from_bytes(at[2][ORIGIN_HEADER])
        assert (at[0], at[1]) == (key, value), (answer, first)
        assert (origin.alias, origin.topic, origin.partition, origin.offset) == (
            "A",
            topic_name,
            p,
            first,
        ), answer

    bad_json, not_replicated, beyond = answers[1000:]
    assert bad_json["error"].startswith("line 1001: not JSON")
    assert bad_json["input"] == "{not json"
    assert not_replicated["error"] == (
        "topic no-such-flow-topic is not replicated from A to B "
        "(no flow, or chain of flows, copies it there)"
    )
    end = max(held[0]) + 1
    assert beyond["error"] == (
        f"offset {end + 49} of {topic_name} partition 0 on A is beyond what flow A->B has "
        f"replicated (replicated position {end}); run ferry until it has caught up"
    )

    # The client library gives the same answers, as objects.
    same = translate_stored_offsets(config, "A", "B", [(topic_name, p, o) for p, o in stored])
    assert all(isinstance(t, Translated) for t in same)
    assert [t.as_json() for t in same] == answers[:1000]

    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(lines[:3] + extra) + "\n")
    table = run_ferry(
        "translate", "-c", str(config), "--offsets", str(few), "--from", "A", "--to", "B",
        env={"COLUMNS": "400"},  # no cell wraps
    )  # fmt: skip
    assert table.returncode == 1
    assert "3 of 6 offset(s) could not be translated" in table.stderr
    assert topic_name in table.stdout and remote in table.stdout
    assert "error: topic no-such-flow-topic is not replicated" in table.stdout
