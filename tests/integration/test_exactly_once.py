"""Exactly-once mode: each partition's copies, runs and progress commit in one transaction."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from ferry.config import FerryConfig, load_config
from ferry.engine.copy.client_settings import consumer_settings, flow_group
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.python_loop import copy_ranges
from ferry.engine.copy.transactional import TransactionalSettings
from ferry.engine.copy.types import CopyContext, CopyRange
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.kafka.log import quiet
from ferry.kafka.provenance import Origin
from ferry.local.broker import BrokerProcess
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.policy import policy_for
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import (
    RECENT_MS,
    Rec,
    cluster_id,
    create_topic,
    produce,
    read_offsets,
    wait_for,
)
from tests.integration.replication_setup import origin_of, run_once, write_config

PARTITIONS = 3
PER_PARTITION = 4000
LONG_TRANSACTIONS = {"transaction.timeout.ms": "600000"}


def _eos_config(tmp_path: Path, clusters: dict[str, BrokerProcess], topic: str) -> Path:
    return write_config(
        tmp_path,
        clusters,
        topics=topic,
        **{"exactly.once.source.support": "enabled", "ferry.batch.max.records": 3000},
    )


def _fill(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, PARTITIONS)
    records = [
        Rec(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode(), (), RECENT_MS + i)
        for i in range(PARTITIONS * PER_PARTITION)
    ]
    produce(bootstrap, topic, records)


def _origins(bootstrap: str, topic: str, expected: int, **settings: str) -> dict[int, list[int]]:
    """Origin offsets per partition of what a consumer reads (read_committed by default)."""
    if settings:
        return _origins_with(bootstrap, topic, expected, settings)
    copied = read_offsets(bootstrap, topic, PARTITIONS, expected)
    return {p: [Origin.from_bytes(origin_of(rec)).offset for _, rec in copied[p]] for p in copied}


def _origins_with(
    bootstrap: str, topic: str, expected: int, settings: dict[str, str]
) -> dict[int, list[int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.partition.eof": True,
            **settings,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    ended: set[int] = set()
    try:
        while len(ended) < PARTITIONS:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    ended.add(msg.partition())
                    continue
                origin = dict(msg.headers() or [])["ferry.origin"]
                out[msg.partition()].append(Origin.from_bytes(origin).offset)
    finally:
        consumer.close()
    assert sum(len(v) for v in out.values()) >= expected
    return out


def _committed_progress(bootstrap: str, topic: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=15
        )
        return {tp.partition: tp.offset for tp in answer}
    finally:
        consumer.close()


def test_exactly_once_copies_each_record_once_with_runs_and_progress(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    _fill(a, topic_name)
    config = _eos_config(tmp_path, kafka_clusters, topic_name)

    progress = run_once(config, spark)["A->B"]

    assert progress.records == PARTITIONS * PER_PARTITION
    remote = f"A.{topic_name}"
    origins = _origins(b, remote, PARTITIONS * PER_PARTITION)
    for p in range(PARTITIONS):
        assert origins[p] == list(range(PER_PARTITION)), (
            f"partition {p}: each record once, in order"
        )
    # The progress committed with the transactions: the next source offset of each partition.
    cfg = load_config(config)
    flow = cfg.enabled_flows[0]
    expected_progress = dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    assert _committed_progress(b, remote, flow_group(flow)) == expected_progress
    # The runs committed with the same transactions map every record to its copy, across the
    # offsets transaction markers take (failover's offset index).
    runs_topic = policy_for(flow.policy, "A").offset_runs_topic("A")
    store = RunsStore(cfg.clusters["B"], runs_topic, "A").refresh()
    copies = read_offsets(b, remote, PARTITIONS, PARTITIONS * PER_PARTITION)
    for p in range(PARTITIONS):
        index = store.index(topic_name, p)
        for offset, rec in copies[p]:
            origin = Origin.from_bytes(origin_of(rec)).offset
            assert index.downstream(origin).offset == offset, f"partition {p} offset {origin}"
    store.close()


def test_a_replayed_batch_writes_nothing_twice_even_without_sparks_checkpoint(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    _fill(a, topic_name)
    config = _eos_config(tmp_path, kafka_clusters, topic_name)
    run_once(config, spark)
    # Spark's checkpoint gone: every batch is planned again from the source's start, as a
    # batch is replayed after a crash. The committed progress in B says it is all there.
    shutil.rmtree(tmp_path / "state")
    produce(a, topic_name, [Rec(p, b"k", b"late", (), RECENT_MS) for p in range(PARTITIONS)])

    progress = run_once(config, spark)["A->B"]

    assert progress.records == PARTITIONS, "only the records written since were copied"
    origins = _origins(b, f"A.{topic_name}", PARTITIONS * (PER_PARTITION + 1))
    for p in range(PARTITIONS):
        assert origins[p] == list(range(PER_PARTITION + 1)), f"partition {p}: no duplicate"


def _zombie_with_partition_0(
    clusters: dict[str, BrokerProcess],
    topic: str,
    tmp_path: Path,
    slot: str,
    parity: int = 0,
    recorded_slots: int = 0,
) -> tuple[Path, FerryConfig, Any]:
    """A filled topic, the flow's config (its state directory remembering `recorded_slots`
    slots of an earlier plan) and a zombie copy task: a producer of `slot`'s id that copied
    partition 0 in a transaction it never ended, as a crashed or frozen ferry leaves one."""
    a, b = clusters["A"].bootstrap, clusters["B"].bootstrap
    _fill(a, topic)
    config = _eos_config(tmp_path, clusters, topic)
    remote = f"A.{topic}"
    create_topic(b, remote, PARTITIONS)
    cfg = load_config(config)
    flow = cfg.enabled_flows[0]
    if recorded_slots:
        FlowState(flow_state_dir(cfg.state_dir, flow)).record_task_slots(recorded_slots)
    ctx = CopyContext("A", a, cluster_id(a), "B", b, cluster_id(b))
    settings = TransactionalSettings.of(cfg.clusters["B"], ctx)
    # As ferry's own: no default delivery callback (the copier gives callbacks where needed).
    zombie = Producer(quiet({**settings.for_task(slot, parity), **LONG_TRANSACTIONS}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    source = Consumer(consumer_settings(cfg.clusters["A"], flow))
    try:
        work = [CopyRange(topic, 0, 0, PER_PARTITION, remote, 1048588)]
        copy_ranges(source, {(topic, 0): zombie}, DeliveryTracker(), work, ctx)
    finally:
        source.close()
    return config, cfg, zombie


def _assert_exactly_once(bootstrap: str, remote: str) -> None:
    committed = _origins(bootstrap, remote, PARTITIONS * PER_PARTITION)
    for p in range(PARTITIONS):
        assert committed[p] == list(range(PER_PARTITION)), f"partition {p}: exactly once"


def test_read_committed_consumers_never_see_an_aborted_replication_transaction(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """A zombie copy task (as left by a crashed ferry) wrote copies in a transaction it never
    committed; the next ferry run fences it, its copies stay invisible to read_committed."""
    b, remote = kafka_clusters["B"].bootstrap, f"A.{topic_name}"
    config, _cfg, zombie = _zombie_with_partition_0(kafka_clusters, topic_name, tmp_path, "0")

    run_once(config, spark)

    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)  # fenced: the run started a newer producer of this id
    _assert_exactly_once(b, remote)
    expected = PARTITIONS * PER_PARTITION
    everything = _origins(b, remote, expected, **{"isolation.level": "read_uncommitted"})
    assert len(everything[0]) == 2 * PER_PARTITION, "the zombie's copies are in the log, aborted"


def test_a_run_fences_every_slot_an_earlier_plan_used(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """An earlier run planned six bins (its state directory says so) and froze with its sixth
    task (slot 5) mid-transaction, holding copies of partition 0. This run's plan is one bin:
    slot 5 is none of its own, so only the fence at its start keeps the frozen task from
    committing when it wakes, after this run has read the positions and copied partition 0."""
    b, remote = kafka_clusters["B"].bootstrap, f"A.{topic_name}"
    config, cfg, zombie = _zombie_with_partition_0(
        kafka_clusters, topic_name, tmp_path, "5", parity=1, recorded_slots=6
    )

    run_once(config, spark)

    group = Consumer({"bootstrap.servers": b, "group.id": flow_group(cfg.enabled_flows[0])})
    try:
        with pytest.raises(KafkaException):  # fenced at the run's start: nothing commits
            zombie.send_offsets_to_transaction(
                [TopicPartition(remote, 0, PER_PARTITION)], group.consumer_group_metadata(), 30
            )
            zombie.commit_transaction(30)
    finally:
        group.close()
    _assert_exactly_once(b, remote)


def _stable_to_end(bootstrap: str, topic: str) -> bool:
    """Every partition's last stable offset is its end: read_committed consumers read it all."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends: dict[Any, dict[int, int]] = {}
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        answer = admin.list_offsets(
            dict.fromkeys(request, OffsetSpec.latest()),  # type: ignore[no-untyped-call]
            isolation_level=level,
            request_timeout=10,
        )
        ends[level] = {tp.partition: f.result().offset for tp, f in answer.items()}
    return ends[IsolationLevel.READ_COMMITTED] == ends[IsolationLevel.READ_UNCOMMITTED]


def test_once_fences_both_ids_of_every_task_slot_before_it_exits(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """A killed lease run left transactions open under its tasks' second (parity-1) ids, on a
    partition with records to copy and on one with none, in two slots. `ferry run --once`
    copies in batches (parity 0 only, as few slots as it needs); it must still fence them, or
    they hold B's last stable offset until the 60 s transaction timeout and read_committed
    consumers stall after --once said done."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    busy = [p for p in range(PARTITIONS) if p != 2]  # partition 2 stays empty: no work
    produce(
        a,
        topic_name,
        [Rec(p, f"k{i}".encode(), b"v", (), RECENT_MS + i) for i in range(500) for p in busy],
    )
    config = _eos_config(tmp_path, kafka_clusters, topic_name)
    remote = f"A.{topic_name}"
    create_topic(b, remote, PARTITIONS)
    cfg = load_config(config)
    ctx = CopyContext("A", a, cluster_id(a), "B", b, cluster_id(b))
    settings = TransactionalSettings.of(cfg.clusters["B"], ctx)
    zombies = []
    for slot, p in (("0", 0), ("1", 2)):
        # Ten minutes, not ferry's 60 s: however slow the run, only a fence ends them.
        zombie_settings = {**settings.for_task(slot, 1), **LONG_TRANSACTIONS}
        zombie = Producer(quiet(zombie_settings))
        zombie.init_transactions(30)
        zombie.begin_transaction()
        zombie.produce(remote, b"half a slice", partition=p)
        assert zombie.flush(30) == 0
        zombies.append(zombie)
    assert not _stable_to_end(b, remote), "the zombies' transactions hold the stable offset"

    result = run_ferry("run", "-c", str(config), "--once")

    assert result.returncode == 0, result.stdout + result.stderr
    # Well inside any transaction timeout: only a fence ends the zombies' transactions.
    wait_for(
        lambda: _stable_to_end(b, remote),
        10,
        f"every partition of {remote} readable to its end (read_committed) after --once",
    )
    copied = read_offsets(b, remote, PARTITIONS, 500 * len(busy), timeout=10)
    for p in busy:
        origins = [Origin.from_bytes(origin_of(rec)).offset for _, rec in copied[p]]
        assert origins == list(range(500)), f"partition {p}: exactly once"
    for zombie in zombies:
        with pytest.raises(KafkaException):
            zombie.commit_transaction(10)  # fenced by the run
