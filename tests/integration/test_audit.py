"""`ferry audit` against real clusters: a clean flow, then a target broken in known ways.

One `ferry run --once` copies three topics. The test then breaks one on purpose (the head of
a remote partition deleted, copies produced a second time, a record written straight into the
remote topic, the head of a source partition deleted as retention would, records produced
after the run); the third holds records that are copies themselves (they carry another
cluster's origin, as on the middle cluster of a chain Z->A->B). One audit run must report each
exactly, and the clean topic as whole (the exit code of a clean audit is checked in
tests/unit/test_audit_cli.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, read_offsets
from tests.integration.replication_setup import run_once, write_config

PER_PARTITION = 50


def _records(partitions: int, count: int, start: int = 0) -> list[Rec]:
    return [
        Rec(p, f"k{i}".encode(), f"v{p}-{i}".encode(), (), RECENT_MS + i)
        for p in range(partitions)
        for i in range(start, start + count)
    ]


def _delete_head(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(30)


def test_audit_reports_each_kind_of_damage_exactly(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, spark: Any, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    clean, broken = f"{topic_name}-clean", f"{topic_name}-broken"
    relayed = f"{topic_name}-relayed"  # A is the middle of a chain Z->A->B
    stamped = f"{topic_name}-stamped"  # its copy on B is stamped with the append time
    for topic in (clean, broken, relayed, stamped):
        create_topic(a, topic, partitions=2)
    create_topic(b, f"A.{stamped}", partitions=2, **{"message.timestamp.type": "LogAppendTime"})
    for topic in (clean, broken, stamped):
        produce(a, topic, _records(2, PER_PARTITION))
    produce(
        a,
        relayed,
        [
            Rec(
                p,
                None,
                b"v",
                ((ORIGIN_HEADER, Origin("zid", "Z", "t", p, 1000 + i).to_bytes()),),
                RECENT_MS,
            )
            for p in range(2)
            for i in range(20)
        ],
    )
    config = write_config(tmp_path, kafka_clusters, topics=f"{topic_name}-.*")
    copy_started = int(time.time() * 1000)
    run_once(config, spark)
    copy_ended = int(time.time() * 1000)
    remote = f"A.{broken}"
    copies = read_offsets(b, remote, 2, 2 * PER_PARTITION)

    _delete_head(b, remote, 0, 10)  # copies of source 0:0-9 lost
    again = [rec for offset, rec in copies[1] if 20 <= offset <= 24]
    produce(b, remote, again)  # source 1:20-24 copied twice
    produce(b, remote, [Rec(1, b"x", b"written straight into the copy", (), RECENT_MS)])
    _delete_head(a, broken, 1, 5)  # retention on the source: 1:0-4 gone, their copies stay
    produce(a, broken, _records(2, 7, start=PER_PARTITION)[:7])  # after the run: in flight
    # A later hop matches by the first hop's origin, which copies keep.
    _delete_head(b, f"A.{relayed}", 0, 3)  # copies of A's relayed 0:0-2 lost
    _delete_head(a, relayed, 1, 2)  # Z's 1000-1001 no longer on A: their copies are expired

    out = tmp_path / "report"
    result = run_ferry(
        "audit", "-c", str(config), "--bucket", "1s", "--json", "--out", str(out), timeout=240
    )
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    flow = document["flows"]["A->B"]
    assert (flow["missing"], flow["duplicated"]) == (10 + 3, 5)

    ok = flow["topics"][clean]
    assert (ok["source"], ok["copied"], ok["copies"]) == (100, 100, 100)
    assert [ok[k] for k in ("missing", "duplicated", "foreign", "expired", "in_flight")] == [0] * 5
    assert (ok["delay_p50_ms"], ok["delay_p99_ms"]) == (None, None)  # copies keep CreateTime

    # Each copy was appended while the run copied, its source record stamped RECENT_MS + i.
    late = flow["topics"][stamped]
    assert (late["source"], late["copied"], late["missing"]) == (100, 100, 0)
    earliest, latest = copy_started - (RECENT_MS + PER_PARTITION), copy_ended - RECENT_MS
    assert earliest <= late["delay_p50_ms"] <= late["delay_p99_ms"] <= latest
    # Buckets by source timestamp hold the delays; B's copies also count (as `target`) in
    # the buckets of their append times, which hold no source record and no delay.
    measured = [b_ for b_ in late["buckets"] if b_["source"]]
    assert measured and all(earliest <= b_["delay_p50_ms"] <= latest for b_ in measured)
    assert all("delay_p50_ms" not in b_ for b_ in late["buckets"] if not b_["source"])

    bad = flow["topics"][broken]
    assert bad["source"] == 100 - 5 + 7
    assert bad["missing"] == 10
    assert bad["missing_ranges"] == [{"partition": 0, "first": 0, "last": 9, "count": 10}]
    assert bad["duplicated"] == 5
    assert bad["duplicated_ranges"] == [{"partition": 1, "first": 20, "last": 24, "count": 5}]
    assert bad["foreign"] == 1
    foreign_offset = PER_PARTITION + 5  # after the copies and the five produced again
    assert bad["foreign_ranges"] == [
        {"partition": 1, "first": foreign_offset, "last": foreign_offset, "count": 1}
    ]
    assert bad["expired"] == 5
    assert bad["in_flight"] == 7
    assert bad["copied"] == 100 - 5 - 10
    assert sum(b_["source"] for b_ in bad["buckets"]) == bad["source"]
    assert sum(b_["missing"] for b_ in bad["buckets"]) == 10

    hop = flow["topics"][relayed]
    assert [hop[k] for k in ("source", "copied", "missing", "expired", "foreign")] == [
        38,
        35,
        3,
        2,
        0,
    ]
    assert hop["missing_ranges"] == [{"partition": 0, "first": 0, "last": 2, "count": 3}]

    assert json.loads((out / "audit.json").read_text()) == document
    png = (out / "audit.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    import matplotlib.image

    assert matplotlib.image.imread(out / "audit.png").shape[0] > 100
