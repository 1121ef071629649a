"""A datacenter lost, its flow failed over as a whole: `ferry failover flow L->B`.

Five groups consume two topics on a cluster of this module's own (L), each a different
amount; every record id was acknowledged by the producer. `ferry run --once` copies L to the
session's B and writes the groups' checkpoints there; then L is stopped (lost). Before that,
a dry run with L answering plans every group from L's offsets and measures the recovery point
(a third topic, written after the copy, is what is behind). After it, the failover moves every
group from its checkpoints in B, except one that has an active member on B (skipped, named);
that member gone, `--groups` moves it. Each group then reads on B exactly the records it had
not consumed on L, by id: none lost, none twice. Run again (CLI and API), nothing changes.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from fastapi.testclient import TestClient

from ferry.api.app import create_app
from ferry.config import load_config
from ferry.control.controller import Controller
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.conftest import TEST_BROKER
from tests.ferry_cli import FerryResult, run_ferry
from tests.integration.group_helpers import commit_group, committed_offsets
from tests.integration.kafka_helpers import create_topic, wait_for
from tests.integration.replication_setup import run_once, write_config

pytestmark = [pytest.mark.integration, pytest.mark.dr]

TP = tuple[str, int]
PER_PARTITION = 20
GROUPS = 5
BEHIND = 10  # records of the third topic, written after the copy


@dataclass
class LostFlow:
    alias: str  # the lost cluster
    config: Path
    b: str
    topics: dict[str, int]  # the copied topics on L: partitions
    late_topic: str  # written on L after the copy
    groups: list[str]
    acked: dict[TP, list[tuple[int, str]]]  # (offset, id) the producer acknowledged
    positions: dict[str, dict[TP, int]]  # each group's committed offsets on L
    dry_run: FerryResult  # with L answering

    @property
    def flow(self) -> str:
        return f"{self.alias}->B"

    def remote(self, topic: str) -> str:
        return f"{self.alias}.{topic}"

    def unconsumed(self, group: str) -> set[str]:
        return {
            record_id
            for tp, records in self.acked.items()
            for offset, record_id in records
            if offset >= self.positions[group][tp]
        }


def _produce_acked(bootstrap: str, topic: str, partitions: int, per: int) -> dict[TP, list[Any]]:
    """`per` records in each partition, each value a unique id; what the brokers acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    acked: dict[TP, list[tuple[int, str]]] = {(topic, p): [] for p in range(partitions)}
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            acked[(topic, msg.partition())].append((msg.offset(), msg.value().decode()))

    for p in range(partitions):
        for i in range(per):
            producer.produce(topic, f"{topic}/{p}/{i}".encode(), partition=p, on_delivery=delivered)
    assert producer.flush(30) == 0 and not failures, failures
    assert all(len(records) == per for records in acked.values())
    return acked


@pytest.fixture(scope="module")
def lost_flow(
    kafka_clusters: dict[str, LocalCluster], spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LostFlow]:
    alias = f"L{uuid.uuid4().hex[:5]}"
    base = f"flow-failover-{uuid.uuid4().hex[:6]}"
    directory = tmp_path_factory.mktemp("lost-dc")
    lost = local.up([alias], directory, {alias: TEST_BROKER})[alias]
    try:
        topics = {f"{base}-t1": 3, f"{base}-t2": 2}
        acked: dict[TP, list[tuple[int, str]]] = {}
        for topic, partitions in topics.items():
            create_topic(lost.bootstrap, topic, partitions)
            acked.update(_produce_acked(lost.bootstrap, topic, partitions, PER_PARTITION))
        # Group i has consumed (5i + 3k) mod 21 records of the k-th partition: from none to all.
        groups = [f"{base}-g{i}" for i in range(GROUPS)]
        positions = {
            group: {tp: (5 * i + 3 * k) % (PER_PARTITION + 1) for k, tp in enumerate(sorted(acked))}
            for i, group in enumerate(groups)
        }
        for group in groups:
            commit_group(lost.bootstrap, group, positions[group])
        clusters = {alias: lost, "B": kafka_clusters["B"]}
        config = write_config(
            directory, clusters, flows=(f"{alias}->B",), topics=f"{re.escape(base)}-t.*"
        )
        run_once(config, spark)  # copies, then writes every group's checkpoints in B
        late = f"{base}-t3"
        create_topic(lost.bootstrap, late, 1)
        _produce_acked(lost.bootstrap, late, 1, BEHIND)
        dry = run_ferry("failover", "flow", "-c", str(config), f"{alias}->B", "--dry-run", "--json")
    finally:
        local.down(directory)  # the datacenter is lost
    yield LostFlow(
        alias,
        config,
        kafka_clusters["B"].bootstrap,
        topics,
        late,
        groups,
        acked,
        positions,
        dry,
    )


def _consume_ids(bootstrap: str, group: str, partitions: list[TP]) -> list[str]:
    """Read as `group` from its committed offsets to the end, then commit where it stopped."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",  # a partition the failover did not commit fails
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(t, p) for t, p in partitions])
    ids: list[str] = []
    next_offsets: dict[TP, int] = {}
    at_end: set[TP] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"not read to the end: {set(partitions) - at_end}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            tp = (msg.topic(), msg.partition())
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(tp)
                continue
            ids.append(msg.value().decode())
            next_offsets[tp] = msg.offset() + 1
        done = [TopicPartition(t, p, o) for (t, p), o in next_offsets.items()]
        if done:
            consumer.commit(offsets=done, asynchronous=False)
    finally:
        consumer.close()
    return ids


def _statuses(report: dict[str, Any]) -> dict[str, str]:
    return {g["group"]: g["status"] for g in report["groups"]}


def _dry_run_with_the_source_answering(lf: LostFlow) -> None:
    assert lf.dry_run.returncode == 0, lf.dry_run.stderr
    dry = json.loads(lf.dry_run.stdout)
    assert (dry["source"], dry["dry_run"]) == ("cluster", True)
    assert _statuses(dry) == {g: "to_move" for g in lf.groups}
    point = dry["recovery_point"]
    assert point["kind"] == "measured", point
    ages = {t["topic"]: (t["age_seconds"], t["offsets_behind"]) for t in point["topics"]}
    assert {t: ages[t] for t in lf.topics} == {t: (0.0, 0) for t in lf.topics}
    age, behind = ages[lf.late_topic]
    assert behind == BEHIND and age is not None and age > 0, ages
    assert point["age_seconds"] == age
    for group in lf.groups:
        assert committed_offsets(lf.b, group) == {}, f"the dry run committed {group}"


@pytest.mark.timeout(900)
def test_a_lost_datacenters_flow_fails_over_every_group_exactly(lost_flow: LostFlow) -> None:
    lf = lost_flow
    _dry_run_with_the_source_answering(lf)
    busy, cfg = lf.groups[-1], str(lf.config)
    remote_partitions = [(lf.remote(t), p) for t, p in sorted(lf.acked)]

    member = Consumer({"bootstrap.servers": lf.b, "group.id": busy, "enable.auto.commit": False})
    member.subscribe([lf.remote(t) for t in lf.topics])
    try:
        wait_for(lambda: member.poll(0.2) is None and bool(member.assignment()), 60, "a member")
        first = run_ferry("failover", "flow", "-c", cfg, lf.flow, "--json")
    finally:
        member.close()
    assert first.returncode == 3, first.stderr  # some group skipped
    report = json.loads(first.stdout)
    assert (report["source"], report["exit_code"]) == ("checkpoints", 3)
    assert any(lf.alias in n and "checkpoints in B" in n for n in report["notices"])
    assert _statuses(report) == {**{g: "moved" for g in lf.groups[:-1]}, busy: "skipped"}
    skipped = next(g for g in report["groups"] if g["group"] == busy)
    assert skipped["reason"] == "active_members"
    assert "1 active member(s) on B" in skipped["detail"]
    assert committed_offsets(lf.b, busy) == {}
    for group in lf.groups[:-1]:
        expected = {(lf.remote(t), p): o for (t, p), o in lf.positions[group].items()}
        assert committed_offsets(lf.b, group) == expected
    point = report["recovery_point"]
    assert point["kind"] == "proven" and point["copied_until"] is not None, point
    assert f"may be on {lf.alias} only" in point["statement"]
    assert {t["topic"] for t in point["topics"]} == set(lf.topics)

    # The member gone, that group alone (--groups): moved, nothing else looked at.
    alone = run_ferry("failover", "flow", "-c", cfg, lf.flow, "--groups", re.escape(busy))
    assert alone.returncode == 0, alone.stderr
    assert f"group {busy}: moved" in alone.stdout
    assert "1 group(s): 1 moved, 0 to move, 0 unchanged, 0 skipped, 0 failed" in alone.stdout

    # Every group reads on B what it had not consumed on L: none lost, none twice.
    for group in lf.groups:
        ids = _consume_ids(lf.b, group, remote_partitions)
        assert len(ids) == len(set(ids)), f"{group} read records twice"
        assert set(ids) == lf.unconsumed(group), f"{group} lost or gained records"

    # Again: every group is where it is (or further, having read on B); nothing changes.
    before = {g: committed_offsets(lf.b, g) for g in lf.groups}
    again = run_ferry("failover", "flow", "-c", cfg, lf.flow, "--json")
    assert again.returncode == 0, again.stderr
    assert _statuses(json.loads(again.stdout)) == {g: "unchanged" for g in lf.groups}
    assert {g: committed_offsets(lf.b, g) for g in lf.groups} == before

    # The API, in process: the same answer for the flow, and a group or a flow, not both.
    config = load_config(lf.config)
    client = TestClient(create_app(Controller(config, lambda _n: None), token=None))
    answer = client.post("/api/v1/failover", json={"flow": lf.flow})
    assert answer.status_code == 200, answer.text
    assert _statuses(answer.json()) == {g: "unchanged" for g in lf.groups}
    assert answer.json()["exit_code"] == 0
    both = client.post("/api/v1/failover", json={"flow": lf.flow, "group": busy})
    assert both.status_code == 422
    assert {g: committed_offsets(lf.b, g) for g in lf.groups} == before
