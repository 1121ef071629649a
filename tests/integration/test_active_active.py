"""Active/active: A<->B under the identity policy, one `ferry run` per direction, as each
datacenter runs its own; producers write to both sides, and each ferry is SIGKILLed and
restarted while they do. Every record must stand exactly once in each cluster: read by the
`ferry.origin` header, none lost, none duplicated, none copied back where it came from.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.chaos.faults import FerryProcess
from tests.integration.group_helpers import committed_offsets
from tests.integration.kafka_helpers import (
    RECENT_MS,
    Rec,
    create_topic,
    produce,
    wait_for,
)
from tests.integration.replication_setup import write_config

# Two `ferry run` processes, each with its own Spark, started three times in all.
pytestmark = [pytest.mark.integration, pytest.mark.topologies, pytest.mark.timeout(1500)]

PARTITIONS = 2
BATCH = 60  # records per side per phase


def _produce(bootstrap: str, topic: str, side: str, phase: int) -> None:
    values = [f"{side}-{phase}-{i}".encode() for i in range(BATCH)]
    produce(
        bootstrap,
        topic,
        [Rec(i % PARTITIONS, None, v, (), RECENT_MS) for i, v in enumerate(values)],
    )


def _held(bootstrap: str, topic: str) -> dict[int, list[tuple[int, Rec]]]:
    """Every committed record of each partition, with its offset. Transaction markers take
    offsets too, so watermarks would overcount: the records are read instead."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-held-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: dict[int, list[tuple[int, Rec]]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: read to the end of {at_end} only"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                continue
            rec = Rec(msg.partition(), msg.key(), msg.value(), tuple(msg.headers() or ()), 0)
            out[msg.partition()].append((msg.offset(), rec))
    finally:
        consumer.close()
    return out


def _count(bootstrap: str, topic: str) -> int:
    return sum(len(rows) for rows in _held(bootstrap, topic).values())


def _caught_up(source: str, target: str, flow_group: str, topic: str) -> bool:
    """The flow's position (kept on the target) is past the source's last record."""
    position = committed_offsets(target, flow_group)
    held = _held(source, topic)
    return all(position.get((topic, p), 0) > rows[-1][0] for p, rows in held.items() if rows)


def test_each_record_once_in_each_cluster_through_kills_of_either_ferry(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    sides = {"A": a, "B": b}
    for bootstrap in sides.values():
        create_topic(bootstrap, topic_name, PARTITIONS)
    ferries: dict[str, FerryProcess] = {}
    for flow in ("A->B", "B->A"):
        directory = tmp_path / flow.replace("->", "-to-")
        directory.mkdir()
        config = write_config(
            directory,
            kafka_clusters,
            flows=(flow,),
            topics=topic_name,
            **{
                "replication.policy.class": "IdentityReplicationPolicy",
                "exactly.once.source.support": "enabled",
            },
        )
        ferries[flow] = FerryProcess(config, directory)

    def settled(phases: int) -> bool:
        return all(_count(s, topic_name) == 2 * BATCH * phases for s in sides.values())

    try:
        for ferry in ferries.values():
            ferry.start()
        for phase, killed in enumerate(("A->B", "B->A"), 1):
            for side, bootstrap in sides.items():
                _produce(bootstrap, topic_name, side, phase)
            target = sides[killed[-1]]
            before = 4 * BATCH * (phase - 1) + BATCH  # what the target held, and its new ones
            wait_for(
                lambda t=target, n=before: _count(t, topic_name) > n,
                300,
                f"{killed} copying phase {phase}",
            )
            ferries[killed].sigkill()  # mid-stream, most likely inside a transaction
            for side, bootstrap in sides.items():
                _produce(bootstrap, topic_name, side, phase + 10)  # while it is down
            ferries[killed].start()
            wait_for(
                lambda n=phase * 2: settled(n),
                400,
                f"both sides hold every record ({killed} restarted)",
            )
        # Both flows' positions reach their sources' ends: nothing is left to copy, so the
        # counts below are final (a loop would keep adding copies).
        for flow in ferries:
            source, target = flow.split("->")
            wait_for(
                lambda s=source, t=target: _caught_up(
                    sides[s], sides[t], f"ferry-{s}-to-{t}", topic_name
                ),
                300,
                f"{flow}'s position at the end of {source}'s {topic_name}",
            )
    finally:
        for ferry in ferries.values():
            if ferry.alive():
                ferry.sigterm()

    produced = 2 * BATCH * 2  # per side: two phases and two phases while a ferry was down
    local: dict[str, set[tuple[int, int]]] = {}
    copies: dict[str, Counter[tuple[str, int, int]]] = {}
    for side, bootstrap in sides.items():
        rows = _held(bootstrap, topic_name)
        assert sum(len(held) for held in rows.values()) == 2 * produced, side
        local[side] = set()
        copies[side] = Counter()
        for p, held in rows.items():
            for offset, rec in held:
                origin = dict(rec.headers).get(ORIGIN_HEADER)
                if origin is None:
                    assert rec.value is not None and rec.value.startswith(side.encode())
                    local[side].add((p, offset))
                else:
                    o = Origin.from_bytes(origin)
                    copies[side][(o.alias, o.partition, o.offset)] += 1
        assert len(local[side]) == produced
    for side, other in (("A", "B"), ("B", "A")):
        looped = [k for k in copies[side] if k[0] == side]
        duplicated = [k for k, n in copies[side].items() if n > 1]
        received = {(p, o) for alias, p, o in copies[side] if alias == other}
        assert (looped, duplicated) == ([], []), side
        assert received == local[other], f"{other}'s records on {side}: lost or foreign"
