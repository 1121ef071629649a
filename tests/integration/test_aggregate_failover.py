"""Aggregation: regional clusters A and B feed aggregates C (A->C, B->C) and D (A->D, B->D).

Under the default policy each region stays a topic of its own (`A.orders`, `B.orders`), and
an aggregate consumer subscribes to both by pattern. It fails over from C to D, which no flow
joins to C: every partition of every remote topic must resume exactly after the last record
the group consumed, 0 lost and 0 read again, by the `ferry.origin` header. C's and D's
remote topics held records of their own before ferry wrote to them, so their offsets differ
and only a translation back to the region and forward again lands right.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import module_clusters
from tests.integration.group_helpers import consume_origins
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, record_count
from tests.integration.replication_setup import write_config
from tests.integration.runs_until import flow_configs, run_in_order

# Four clusters and Spark start on a machine that may be busy: generous time.
pytestmark = [pytest.mark.integration, pytest.mark.topologies, pytest.mark.timeout(900)]

aggregates = module_clusters("C", "D")

TP = tuple[str, int]
PER_PARTITION = 30
FOREIGN = {("C", "B"): 2, ("D", "A"): 4}  # (aggregate, region): records there before ferry's


def _consume_by_pattern(bootstrap: str, group: str, pattern: str, wanted: dict[TP, int]) -> None:
    """A consumer of `group` subscribed to `pattern` processes `wanted[tp]` records of each
    partition and commits after the last one it processed, as an application does."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([pattern])
    processed: dict[TP, int] = {}
    seen: dict[TP, int] = {}
    deadline = time.monotonic() + 120
    try:
        while any(seen.get(tp, 0) < n for tp, n in wanted.items()):
            assert time.monotonic() < deadline, f"read {seen} of {wanted} by pattern {pattern}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            tp = (msg.topic(), msg.partition())
            seen[tp] = seen.get(tp, 0) + 1
            if seen[tp] <= wanted[tp]:
                processed[tp] = msg.offset() + 1
        assert set(processed) == set(wanted), (processed, wanted)
        offsets = [TopicPartition(t, p, o) for (t, p), o in processed.items()]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _origins(bootstrap: str, topic: str, partition: int, start: int) -> list[tuple[str, int]]:
    """(origin alias, origin offset) of every record of a partition from `start` on."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-origins"})
    consumer.assign([TopicPartition(topic, partition, start)])
    _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    out: list[tuple[str, int]] = []
    deadline = time.monotonic() + 60
    try:
        position = start
        while position < end:
            assert time.monotonic() < deadline, f"{topic} {partition}: read to {position} of {end}"
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            position = msg.offset() + 1
            origin = Origin.from_bytes(dict(msg.headers() or ())[ORIGIN_HEADER])
            out.append((origin.alias, origin.offset))
    finally:
        consumer.close()
    return out


def test_a_pattern_group_fails_over_between_aggregates_exactly_on_every_partition(
    kafka_clusters: dict[str, LocalCluster],
    aggregates: dict[str, LocalCluster],
    topic_name: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    clusters = {**kafka_clusters, **aggregates}
    c, d = aggregates["C"].bootstrap, aggregates["D"].bootstrap
    for region in "AB":
        source = clusters[region].bootstrap
        create_topic(source, topic_name, 2)
        records = [Rec(p, None, b"v", (), RECENT_MS + i) for p in (0, 1) for i in range(30)]
        produce(source, topic_name, records)
    for (aggregate, region), count in FOREIGN.items():
        remote = f"{region}.{topic_name}"
        create_topic(clusters[aggregate].bootstrap, remote, 2)
        produce(
            clusters[aggregate].bootstrap,
            remote,
            [Rec(p, None, b"own", (), 0) for p in (0, 1)] * count,
        )

    flows = ("A->C", "B->C", "A->D", "B->D")
    config = write_config(tmp_path, clusters, flows=flows, topics=topic_name)
    run_in_order(flow_configs(tmp_path, clusters, flows, topics=topic_name), spark)
    expected = {
        (aggregate, f"{region}.{topic_name}"): 2 * PER_PARTITION
        + 2 * FOREIGN.get((aggregate, region), 0)
        for aggregate in "CD"
        for region in "AB"
    }

    def all_copied() -> bool:
        return all(
            record_count(clusters[agg].bootstrap, topic) == n
            for (agg, topic), n in expected.items()
        )

    assert all_copied(), {k: record_count(clusters[k[0]].bootstrap, k[1]) for k in expected}

    group = f"aggregate-app-{uuid.uuid4().hex[:6]}"
    a_topic, b_topic = f"A.{topic_name}", f"B.{topic_name}"
    processed = {(a_topic, 0): 1, (a_topic, 1): 17, (b_topic, 0): 32, (b_topic, 1): 2}
    pattern = f"^[AB]\\.{re.escape(topic_name)}$"
    _consume_by_pattern(c, group, pattern, processed)

    plan = run_ferry(
        "failover", "group", "-c", str(config), group, "--from", "C", "--to", "D", "--json"
    )
    assert plan.returncode == 0, plan.stderr
    positions = json.loads(plan.stdout)["positions"]
    assert {(p["target_topic"], p["partition"]) for p in positions} == set(processed)
    assert {p["via"] for p in positions} == {
        "inverse runs A->C, runs A->D",
        "inverse runs B->C, runs B->D",
    }

    read = consume_origins(d, group, sorted(processed))
    for (topic, p), count in processed.items():
        region = topic[0]
        unread_on_c = [o for alias, o in _origins(c, topic, p, count) if alias == region]
        assert read[(topic, p)] == unread_on_c, (topic, p)
    assert read == {
        (a_topic, 0): list(range(1, PER_PARTITION)),
        (a_topic, 1): list(range(17, PER_PARTITION)),
        (b_topic, 0): [],  # consumed to the end on C, foreign records included
        (b_topic, 1): list(range(PER_PARTITION)),  # only C's own two records were consumed
    }
