"""A chain A->B->C: C's copies keep A's origin, C knows its upstream, a group fails over
from A to C across both hops and back, 0 lost and 0 read again (by the `ferry.origin` header).

The offsets differ on every hop, so only a translation through both flows' runs lands
right: retention removed the first records of A's partition 0 (B's copy starts at A's
offset 10) and C's remote topic held records of its own before ferry wrote to it.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.client import replication_hops, upstream_clusters
from ferry.kafka.provenance import Origin
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import module_clusters
from tests.integration.group_helpers import (
    commit_group,
    committed_offsets,
    consume_origins,
    origin_at,
)
from tests.integration.kafka_helpers import (
    RECENT_MS,
    Rec,
    create_topic,
    produce,
    read_offsets,
    record_count,
)
from tests.integration.replication_setup import origin_of, write_config
from tests.integration.runs_until import flow_configs, run_in_order

# Three or four clusters and Spark start on a machine that may be busy: generous time.
pytestmark = [pytest.mark.integration, pytest.mark.topologies, pytest.mark.timeout(900)]

cluster_c = module_clusters("C")

PARTITIONS = 3
PER_PARTITION = 60
RETAINED_FROM = 10  # A's partition 0 starts here
FOREIGN = 3  # records on C's remote topic before ferry's copies


def _delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        future.result(30)


def _offsets(plan: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {(p["target_topic"], p["partition"]): p["offset"] for p in plan["positions"]}


def test_a_group_fails_over_from_a_to_c_across_two_hops_and_back(
    kafka_clusters: dict[str, LocalCluster],
    cluster_c: dict[str, LocalCluster],
    topic_name: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    clusters = {**kafka_clusters, **cluster_c}
    a, c = clusters["A"].bootstrap, clusters["C"].bootstrap
    on_c = f"B.A.{topic_name}"
    create_topic(a, topic_name, PARTITIONS)
    produce(
        a,
        topic_name,
        [
            Rec(p, None, f"{p}-{i}".encode(), (), RECENT_MS + i)
            for p in range(PARTITIONS)
            for i in range(PER_PARTITION)
        ],
    )
    _delete_before(a, topic_name, 0, RETAINED_FROM)
    create_topic(c, on_c, PARTITIONS)
    produce(c, on_c, [Rec(p, None, b"C's own", (), RECENT_MS) for p in range(PARTITIONS)] * FOREIGN)
    group = f"chain-app-{uuid.uuid4().hex[:6]}"
    positions = {(topic_name, 0): 5, (topic_name, 1): 23, (topic_name, 2): PER_PARTITION}
    commit_group(a, group, positions)

    settings = {"topics": f"{topic_name}|A\\.{topic_name}", "emit.heartbeats.enabled": "true"}
    config = write_config(tmp_path, clusters, flows=("A->B", "B->C"), **settings)
    hops = flow_configs(tmp_path, clusters, ("A->B", "B->C"), **settings)
    run_in_order(hops, spark)  # copies A's records and heartbeats to B, and heartbeats
    run_in_order(hops, spark)  # emitted after copying on the way to C
    copied = PER_PARTITION * PARTITIONS - RETAINED_FROM
    assert record_count(c, on_c) == copied + FOREIGN * PARTITIONS

    # C's copies carry the first hop's origin: A, A's topic, A's partition and offset.
    held = read_offsets(c, on_c, PARTITIONS, copied + FOREIGN * PARTITIONS)
    for p, rows in held.items():
        origins = [Origin.from_bytes(origin_of(rec)) for _, rec in rows[FOREIGN:]]
        assert {(o.alias, o.topic, o.partition) for o in origins} == {("A", topic_name, p)}
        first = RETAINED_FROM if p == 0 else 0
        assert [o.offset for o in origins] == list(range(first, PER_PARTITION))
    # What MM2's RemoteClusterUtils answers on C, from the heartbeats topics.
    assert replication_hops(c, "A") == 2
    assert replication_hops(c, "B") == 1
    assert replication_hops(c, "D") == -1
    assert upstream_clusters(c) == {"A", "B"}

    translated = run_ferry(
        "translate", "-c", str(config), "--group", group, "--from", "A", "--to", "C", "--json"
    )
    assert translated.returncode == 0, translated.stderr
    plan = json.loads(translated.stdout)
    assert {p["target_topic"] for p in plan["positions"]} == {on_c}
    assert {p["via"] for p in plan["positions"]} == {"runs A->B, runs B->C"}
    assert committed_offsets(c, group) == {}

    # As with A lost: no A->C flow wrote checkpoints in C, so the ones A->B wrote in B are
    # carried on through B->C's runs, to the same offsets (the group has not moved since).
    lost = run_ferry(
        "translate", "-c", str(config), "--group", group, "--from", "A", "--to", "C",
        "--from-checkpoints", "--json",
    )  # fmt: skip
    assert lost.returncode == 0, lost.stderr
    by_checkpoints = json.loads(lost.stdout)
    assert {p["via"] for p in by_checkpoints["positions"]} == {"checkpoint A->B, runs B->C"}
    assert _offsets(by_checkpoints) == _offsets(plan)
    assert len(_offsets(plan)) == PARTITIONS

    result = run_ferry("failover", "group", "-c", str(config), group, "--from", "A", "--to", "C")
    assert result.returncode == 0, result.stderr
    read = consume_origins(c, group, [(on_c, p) for p in range(PARTITIONS)])
    assert read == {
        (on_c, 0): list(range(RETAINED_FROM, PER_PARTITION)),  # 5 was behind retention
        (on_c, 1): list(range(23, PER_PARTITION)),
        (on_c, 2): [],
    }

    # The group reads further on C and fails back to A: it lands right after its last record.
    further = {
        tp: offset + (5 if tp[1] < 2 else 0) for tp, offset in committed_offsets(c, group).items()
    }
    commit_group(c, group, further)
    back = run_ferry("failover", "group", "-c", str(config), group, "--from", "C", "--to", "A")
    assert back.returncode == 0, back.stderr
    on_a = committed_offsets(a, group)
    expected = {
        (topic_name, p): origin_at(c, on_c, p, offset - 1) + 1 for (_, p), offset in further.items()
    }
    assert on_a == expected
    assert expected == {(topic_name, 0): 15, (topic_name, 1): 28, (topic_name, 2): PER_PARTITION}
