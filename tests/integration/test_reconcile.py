"""The datacenter back after an unplanned failover: `ferry reconcile` on the stranded tail.

A pair of clusters of this module's own, A and B. Four topics on A (one per policy, each
selected by its own config, so each test has a flow of its own); `ferry run --once` copies
them to B; ferry stops; more records are produced to A (every id acknowledged), among them
an aborted transaction and a committed one (markers); A is SIGKILLed (lost) and restarted on
its data (back). Each test then checks, by id, that reconcile sees exactly the acknowledged
records B lacks, and that its policy writes exactly those, once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.conftest import TEST_BROKER
from tests.ferry_cli import run_ferry
from tests.integration.group_helpers import commit_group
from tests.integration.kafka_helpers import cluster_id, create_topic, wait_for
from tests.integration.replication_setup import run_once, write_config

pytestmark = [pytest.mark.integration, pytest.mark.dr]

TP = tuple[str, int]
PARTITIONS = 2
COPIED = 15  # per partition, copied by ferry before A is lost
POLICIES = ("report", "replay", "divert", "export")


@dataclass
class Lost:
    clusters: dict[str, LocalCluster]
    base: str  # topics are f"{base}-{policy}"
    copied: set[str]  # ids on B before A was lost
    stranded: dict[str, set[str]]  # per policy: the ids acknowledged after ferry stopped
    aborted: set[str]
    a_id: str
    outage: set[str]  # written to B's identity topic while A was lost

    def topic(self, policy: str) -> str:
        return f"{self.base}-{policy}"

    def config(self, directory: Path, policy: str, *, running: bool = False) -> Path:
        """The flow A->B stopped, as the runbook keeps it while reconcile runs (`running`:
        enabled, as the `ferry run` that copied it had it)."""
        flows = ("A->B",) if running else ()
        return write_config(directory, self.clusters, flows=flows, topics=self.topic(policy))


def _produce(bootstrap: str, topic: str, ids: list[str], transactional: str | None = None,
             abort: bool = False, origin: bytes | None = None) -> set[str]:  # fmt: skip
    """Each id a record (key and value), spread over the partitions; the ids acknowledged."""
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all"}
    if transactional:
        settings["transactional.id"] = transactional
    producer = Producer(settings)
    acked: set[str] = set()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(msg.value().decode())

    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i, record_id in enumerate(ids):
        producer.produce(
            topic,
            key=record_id.encode(),
            value=record_id.encode(),
            partition=i % PARTITIONS,
            headers=[("app", b"x")] + ([(ORIGIN_HEADER, origin)] if origin else []),
            on_delivery=on_delivery,
        )
    producer.flush(30)
    if transactional:
        if abort:
            producer.abort_transaction(30)
            return set()
        producer.commit_transaction(30)
    assert acked == set(ids), f"not acknowledged: {set(ids) - acked}"
    return acked


@pytest.fixture(scope="module")
def lost(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[Lost]:
    directory = tmp_path_factory.mktemp("kafka-reconcile")
    brokers = local.up(["A", "B"], directory, {"A": TEST_BROKER, "B": TEST_BROKER})
    try:
        a = brokers["A"].bootstrap
        base = f"orders-{uuid.uuid4().hex[:6]}"
        copied: set[str] = set()
        for policy in POLICIES:
            topic = f"{base}-{policy}"
            create_topic(a, topic, PARTITIONS)
            copied |= _produce(a, topic, [f"{policy}-c{i}" for i in range(COPIED * PARTITIONS)])
        run_once(write_config(directory, brokers, topics=f"{base}-({'|'.join(POLICIES)})"), spark)
        b, b_id = brokers["B"].bootstrap, cluster_id(brokers["B"].bootstrap)
        identity = f"{base}-identity"
        create_topic(a, identity, PARTITIONS)
        copied |= _produce(a, identity, [f"identity-c{i}" for i in range(COPIED * PARTITIONS)])
        run_once(_identity_config(directory / "identity", brokers, identity, "A->B"), spark)
        # Producers failed over to B write to the same topic name there (identity policy).
        outage = _produce(b, identity, [f"identity-b{i}" for i in range(5)])
        stranded: dict[str, set[str]] = {}
        aborted: set[str] = set()
        for policy in POLICIES:
            topic = f"{base}-{policy}"
            ids = _produce(a, topic, [f"{policy}-s{i}" for i in range(6)])
            gone = [f"{policy}-aborted{i}" for i in range(3)]
            _produce(a, topic, gone, f"abort-{topic}", abort=True)
            aborted |= set(gone)
            ids |= _produce(a, topic, [f"{policy}-t{i}" for i in range(4)], f"commit-{topic}")
            ids |= _produce(a, topic, [f"{policy}-s{i}" for i in range(6, 11)])
            stranded[policy] = ids
        ids = _produce(a, identity, [f"identity-s{i}" for i in range(6)])
        # Copies of B's records that a flow B->A made: B has them, they are not stranded.
        from_b = f"{b_id}|B|0|7|{identity}".encode()
        _produce(a, identity, ["identity-from-b0", "identity-from-b1"], origin=from_b)
        stranded["identity"] = ids | _produce(a, identity, [f"identity-s{i}" for i in range(6, 9)])
        a_id = cluster_id(a)
        brokers["A"].kill()  # the datacenter is lost
        brokers["A"].restart(timeout=120)  # and back, with its data
        yield Lost(brokers, base, copied, stranded, aborted, a_id, outage)
    finally:
        for broker in brokers.values():
            broker.stop()
        local.down(directory)


def _identity_config(
    directory: Path, clusters: dict[str, LocalCluster], topic: str, flow: str
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    settings = {"replication.policy.class": "identity"}
    return write_config(directory, clusters, flows=(flow,), topics=topic, **settings)


def _reconcile(config: Path, *options: str) -> tuple[int, dict[str, Any]]:
    result = run_ferry("reconcile", "-c", str(config), "--flow", "A->B", *options, "--json")
    assert result.returncode in (0, 3), result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def _read(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic` (read_committed), once its end is reached in each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    md = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in md.partitions])
    records: list[Any] = []
    done: set[int] = set()

    def drained() -> bool:
        for msg in consumer.consume(500, 0.5):
            if msg.error() is not None:
                done.add(msg.partition())
            else:
                records.append(msg)
        return len(done) == len(md.partitions)

    try:
        wait_for(drained, 60, f"the end of every partition of {topic}")
    finally:
        consumer.close()
    return records


def _ids(records: list[Any]) -> list[str]:
    return sorted(m.value().decode() for m in records)


def _header(msg: Any, name: str) -> bytes | None:
    values = [v for k, v in msg.headers() or () if k == name]
    return values[-1] if values else None


def _stranded_ids(lost: Lost, policy: str, plan: dict[str, Any]) -> set[str]:
    """The ids of the records A holds inside the ranges reconcile reported."""
    a = lost.clusters["A"].bootstrap
    held = {(m.partition(), m.offset()): m.value().decode() for m in _read(a, lost.topic(policy))}
    found: set[str] = set()
    for p in plan["partitions"]:
        for r in p["ranges"]:
            found |= {
                v
                for (part, o), v in held.items()
                if part == p["partition"] and r["first"] <= o <= r["last"]
            }
    return found


def test_report_only_lists_exactly_the_records_b_lacks(lost: Lost, tmp_path: Path) -> None:
    config = lost.config(tmp_path, "report")
    code, plan = _reconcile(config, "--report-only")
    assert code == 3
    assert plan["stranded"] == len(lost.stranded["report"]) == 15
    assert _stranded_ids(lost, "report", plan) == lost.stranded["report"]
    assert {p["position_from"] for p in plan["partitions"]} == {"progress"}
    assert all(p["own"] == p["stranded"] for p in plan["partitions"])
    assert plan["recovery_point"]["rpo_ms"] is not None and plan["recovery_point"]["rpo_ms"] >= 0
    assert plan["applied"] is None
    # Nothing was written: B still lacks them, and a second look says the same.
    assert _reconcile(config, "--report-only") == (3, plan)
    table = run_ferry("reconcile", "-c", str(config), "--flow", "A->B", "--report-only")
    assert table.returncode == 3
    assert "stranded: 15 record(s) in 2 partition(s)" in table.stdout
    assert "RPO" in table.stdout and "progress" in table.stdout


def test_replay_copies_them_once_and_a_second_replay_nothing(
    lost: Lost, tmp_path: Path, spark: Any
) -> None:
    # While the config (and no control record) says A->B runs, nothing is written.
    (tmp_path / "running").mkdir()
    running = lost.config(tmp_path / "running", "replay", running=True)
    refused = run_ferry("reconcile", "-c", str(running), "--flow", "A->B", "--replay")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        "flow A->B runs: the config file enables it and its control record neither stops nor "
        "pauses it, and --replay or --divert must not run beside it" in refused.stderr
    )
    code, report = _reconcile(running, "--report-only")  # looking is always allowed
    assert code == 3 and report["stranded"] == 15

    config = lost.config(tmp_path, "replay")
    code, plan = _reconcile(config, "--replay")
    assert code == 0
    assert plan["stranded"] == 15 and plan["applied"]["written"] == 15
    b = lost.clusters["B"].bootstrap
    on_b = _read(b, f"A.{lost.topic('replay')}")
    copied = {i for i in lost.copied if i.startswith("replay-")}
    assert _ids(on_b) == sorted(copied | lost.stranded["replay"])  # each once, none aborted
    late = [m for m in on_b if _header(m, "ferry.late") == b"1"]
    assert _ids(late) == sorted(lost.stranded["replay"])
    for msg in late:
        origin = Origin.from_bytes(_header(msg, ORIGIN_HEADER) or b"")
        assert (origin.cluster_id, origin.alias, origin.topic) == (
            lost.a_id, "A", lost.topic("replay"),
        )  # fmt: skip
        assert origin.partition == msg.partition() and _header(msg, "app") == b"x"

    code, again = _reconcile(config, "--replay")
    assert code == 0 and again["stranded"] == 0 and again["applied"]["written"] == 0
    assert _ids(_read(b, f"A.{lost.topic('replay')}")) == _ids(on_b)
    code, report = _reconcile(config, "--report-only")
    assert code == 0 and report["stranded"] == 0

    # The position commit lost (a crash right after the transactions): the runs on B still
    # say the replayed records are there.
    commit_group(b, "ferry-A-to-B", {(f"A.{p['topic']}", p["partition"]): p["position"]
                                     for p in plan["partitions"]})  # fmt: skip
    code, report = _reconcile(config, "--replay")
    assert code == 0 and report["stranded"] == 0 and report["applied"]["written"] == 0
    assert {p["position_from"] for p in report["partitions"]} == {"runs"}
    assert _ids(_read(b, f"A.{lost.topic('replay')}")) == _ids(on_b)

    # The reverse flow B->A (default policy) never copies A.<topic> back to A.
    topic = lost.topic("replay")
    a = lost.clusters["A"].bootstrap
    before = _ids(_read(a, topic))
    (tmp_path / "back").mkdir()
    back = write_config(tmp_path / "back", lost.clusters, flows=("B->A",), topics=f"A\\.{topic}")
    run_once(back, spark)
    assert _ids(_read(a, topic)) == before
    names = AdminClient({"bootstrap.servers": a}).list_topics(timeout=10).topics
    assert f"B.A.{topic}" not in names


def test_divert_writes_them_to_a_quarantine_topic(lost: Lost, tmp_path: Path) -> None:
    config = lost.config(tmp_path, "divert")
    quarantine = f"quarantine-{lost.base}"
    code, plan = _reconcile(config, "--divert", quarantine)
    assert code == 0 and plan["applied"]["written"] == 15
    b = lost.clusters["B"].bootstrap
    held = _read(b, quarantine)
    assert _ids(held) == sorted(lost.stranded["divert"])
    assert all(_header(m, "ferry.late") == b"1" for m in held)
    remote = _ids(_read(b, f"A.{lost.topic('divert')}"))
    assert remote == sorted(i for i in lost.copied if i.startswith("divert-"))

    code, again = _reconcile(config, "--divert", quarantine)
    assert code == 0 and again["stranded"] == 0
    assert _ids(_read(b, quarantine)) == _ids(held)


def test_export_writes_them_as_parquet(lost: Lost, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    config = lost.config(tmp_path, "export")
    code, plan = _reconcile(config, "--export", str(tmp_path / "out"))
    assert code == 0 and plan["applied"]["written"] == 15
    table = pq.read_table(tmp_path / "out" / "A-to-B").to_pylist()
    assert sorted(r["value"].decode() for r in table) == sorted(lost.stranded["export"])
    assert {r["topic"] for r in table} == {lost.topic("export")}
    assert all(r["key"] == r["value"] for r in table)
    assert all({"key": "app", "value": b"x"} in r["headers"] for r in table)
    # Nothing was written to B: the records are still stranded.
    code, report = _reconcile(config, "--report-only")
    assert code == 3 and report["stranded"] == 15


def test_identity_policy_replay_and_the_reverse_flow(
    lost: Lost, tmp_path: Path, spark: Any
) -> None:
    """Under the identity policy the remote topic is the one B's producers wrote during the
    outage; records A got from B are not stranded; after a replay, the reverse flow B->A copies
    only B's outage writes back to A, none of A's records (their origin is A)."""
    topic = lost.topic("identity")
    config = _identity_config(tmp_path / "ab", lost.clusters, topic, "A->B")
    code, plan = _reconcile(config, "--report-only")
    assert code == 3 and _stranded_ids(lost, "identity", plan) == lost.stranded["identity"]
    assert sum(p["from_target"] for p in plan["partitions"]) == 2
    assert {p["remote_topic"] for p in plan["partitions"]} == {topic}

    # The config enables A->B; --force says no ferry run copies it.
    code, plan = _reconcile(config, "--replay", "--force")
    assert code == 0 and plan["applied"]["written"] == len(lost.stranded["identity"]) == 9
    a, b = lost.clusters["A"].bootstrap, lost.clusters["B"].bootstrap
    copied = {i for i in lost.copied if i.startswith("identity-")}
    assert _ids(_read(b, topic)) == sorted(copied | lost.outage | lost.stranded["identity"])

    before = _ids(_read(a, topic))
    run_once(_identity_config(tmp_path / "ba", lost.clusters, topic, "B->A"), spark)
    assert _ids(_read(a, topic)) == sorted(before + sorted(lost.outage))
