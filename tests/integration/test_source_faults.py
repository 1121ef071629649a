"""Two source-side faults a DR replicator must never hide, against the session's real clusters.

- Records the source deleted (retention, DeleteRecords) before ferry copied them: ferry copies
  from the new log start and reports the gap (the counter `ferry_source_records_lost_total`,
  an event naming cluster, topic, partition and the offsets lost, `ferry status`).
- A source topic deleted and created again under the same name: ferry copies the new topic from
  its start (its topic id changed), even once it has more records than ferry's position in the
  old one, and says so naming both ids.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry, generate_latest

from ferry.config import load_config
from ferry.engine.copy.progress import progress_offset
from ferry.engine.flow_spec import flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.engine.run_metrics import RunMetrics
from ferry.engine.runner import FlowProgress, Runner
from ferry.local.broker import BrokerProcess
from ferry.ops.status import flow_status
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    read_offsets,
    wait_for,
)
from tests.integration.replication_setup import origin_of, write_config

MODES = {
    "at-least-once": {},
    "exactly-once": {"exactly.once.source.support": "enabled"},
}


def _records(value: str, first: int, count: int) -> list[Rec]:
    return [Rec(0, None, f"{value}-{i}".encode(), (), 0) for i in range(first, first + count)]


def _run_once(config: Path, spark: Any) -> tuple[FlowProgress, list[str]]:
    notices: list[str] = []
    [progress] = Runner(load_config(config), once=True, spark=spark, on_notice=notices.append).run()
    return progress, notices


def _copied_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    return [rec.value or b"" for _, rec in read_offsets(bootstrap, topic, 1, expected, 60)[0]]


def _origin_offsets(bootstrap: str, topic: str, expected: int) -> list[int]:
    rows = read_offsets(bootstrap, topic, 1, expected, 60)[0]
    return [int(origin_of(rec).split(b"|")[3]) for _, rec in rows]


def _delete_records(bootstrap: str, topic: str, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        future.result(30)


def _metrics_text(config: Path) -> str:
    cfg = load_config(config)
    [flow] = cfg.enabled_flows
    state = FlowState(flow_state_dir(cfg.state_dir.resolve(), flow))
    registry = CollectorRegistry()
    registry.register(RunMetrics(lambda: [(flow.name, state, {})]))
    return generate_latest(registry).decode()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_records_deleted_before_copy_are_reported_and_the_rest_copied(
    kafka_clusters: dict[str, BrokerProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, _records("v", 0, 100))
    config = write_config(tmp_path, kafka_clusters, topics=topic_name, **MODES[mode])
    first, _ = _run_once(config, spark)
    assert first.records == 100
    # ferry is stopped; 100 more arrive, and the source deletes up to offset 150 before
    # ferry copied 100..149.
    produce(a, topic_name, _records("v", 100, 100))
    _delete_records(a, topic_name, 150)

    second, notices = _run_once(config, spark)

    assert (second.records, second.expired) == (50, 50)
    remote = f"A.{topic_name}"
    assert _origin_offsets(b, remote, 150) == [*range(100), *range(150, 200)]
    lost = [n for n in notices if "lost" in n]
    assert lost, notices
    assert f"cluster A, topic {topic_name}, partition 0: offsets 100..149" in lost[0], lost
    metrics = _metrics_text(config)
    assert "# HELP ferry_source_records_lost_total Records removed from the source" in metrics
    wanted = f'ferry_source_records_lost_total{{flow="A->B",partition="0",topic="{topic_name}"}}'
    assert f"{wanted} 50.0" in metrics, metrics
    status = flow_status(load_config(config), load_config(config).enabled_flows[0])
    assert status.lost == 50
    assert [(p.topic, p.partition, p.lost, p.lost_offsets) for p in status.partitions] == [
        (topic_name, 0, 50, "100..149")
    ]
    printed = run_ferry("status", "-c", str(config))
    assert printed.returncode == 0, printed.stderr
    assert "lost before copy" in printed.stdout and "100..149" in printed.stdout, printed.stdout


def test_records_deleted_during_a_leased_run_are_reported_and_the_rest_copied(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    """A continuous run (leases): ferry's state directory is gone too, so the position on the
    target is all it has; records below the source's log start are still reported."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, _records("v", 0, 60))
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir(), second_dir.mkdir()
    first, _ = _run_once(write_config(first_dir, kafka_clusters, topics=topic_name), spark)
    assert first.records == 60
    produce(a, topic_name, _records("v", 60, 60))
    _delete_records(a, topic_name, 90)
    config = write_config(second_dir, kafka_clusters, topics=topic_name)
    notices: list[str] = []
    runner = Runner(load_config(config), spark=spark, on_notice=notices.append)
    remote = f"A.{topic_name}"

    def meanwhile() -> None:
        wait_for(lambda: any("lost" in n for n in notices), 120, "the lost records reported")

    thread_failures: list[BaseException] = []

    def watch() -> None:
        try:
            meanwhile()
        except BaseException as exc:
            thread_failures.append(exc)
        finally:
            runner.request_stop()

    beside = threading.Thread(target=watch, daemon=True)
    beside.start()
    [progress] = runner.run()
    beside.join(30)
    if thread_failures:
        raise thread_failures[0]

    assert (progress.records, progress.expired) == (30, 30)
    assert _origin_offsets(b, remote, 90) == [*range(60), *range(90, 120)]
    lost = [n for n in notices if "lost" in n]
    assert f"cluster A, topic {topic_name}, partition 0: offsets 60..89" in lost[0], lost


def _recreate(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 60, "topic deleted")

    def created() -> bool:
        try:
            create_topic(bootstrap, topic, partitions)
        except Exception:  # still being deleted: try again
            return False
        return True

    wait_for(created, 60, "topic created again")


def _topic_id(bootstrap: str, topic: str) -> str:
    from confluent_kafka import TopicCollection

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return str(admin.describe_topics(TopicCollection([topic]))[topic].result(30).topic_id)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_recreated_topic_with_more_records_than_the_old_position_is_copied_from_its_start(
    kafka_clusters: dict[str, BrokerProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    """The new topic holds 80 records, ferry's position in the old one is 50: without the
    topic id, offsets 50..79 look like the next records and 0..49 would be skipped."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, _records("old", 0, 50))
    old_id = _topic_id(a, topic_name)
    config = write_config(tmp_path, kafka_clusters, topics=topic_name, **MODES[mode])
    first, _ = _run_once(config, spark)
    assert first.records == 50
    _recreate(a, topic_name)
    produce(a, topic_name, _records("new", 0, 80))
    new_id = _topic_id(a, topic_name)
    assert new_id != old_id

    second, notices = _run_once(config, spark)

    assert second.records == 80
    values = _copied_values(b, f"A.{topic_name}", 130)
    assert values == [f"old-{i}".encode() for i in range(50)] + [
        f"new-{i}".encode() for i in range(80)
    ]
    said = [n for n in notices if "re-created" in n]
    assert said, notices
    assert topic_name in said[0] and old_id in said[0] and new_id in said[0], said


def test_recreated_topic_is_copied_from_its_start_by_a_leased_run(
    kafka_clusters: dict[str, BrokerProcess], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, _records("old", 0, 40))
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    first, _ = _run_once(config, spark)
    assert first.records == 40
    _recreate(a, topic_name)
    produce(a, topic_name, _records("new", 0, 70))
    remote = f"A.{topic_name}"
    notices = _run_until_copied(config, spark, b, remote, 110)

    values = _copied_values(b, remote, 110)
    assert values == [f"old-{i}".encode() for i in range(40)] + [
        f"new-{i}".encode() for i in range(70)
    ]
    assert any("re-created" in n and topic_name in n for n in notices), notices


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_partition_already_copying_the_new_topic_is_not_set_back(
    kafka_clusters: dict[str, BrokerProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    """A topic deleted and created again under a running lease: a task that met the new topic
    copies its partition from the start and commits it with the new id, while another
    partition still holds its position in the old topic. The next lease sets back only that
    one; set back too, the first partition's new records would be copied a second time."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    old = [Rec(p, None, f"old-{p}-{i}".encode(), (), 0) for p in (0, 1) for i in range(30)]
    produce(a, topic_name, old)
    old_id = _topic_id(a, topic_name)
    config = write_config(tmp_path, kafka_clusters, topics=topic_name, **MODES[mode])
    first, _ = _run_once(config, spark)
    assert first.records == 60
    _recreate(a, topic_name, 2)
    produce(
        a,
        topic_name,
        [Rec(p, None, f"new-{p}-{i}".encode(), (), 0) for p in (0, 1) for i in range(50)],
    )
    new_id = _topic_id(a, topic_name)
    # Partition 0 as a task that met the new topic leaves it: its first 20 records copied and
    # the position committed with the new id (the copies themselves are not needed here).
    [flow] = load_config(config).enabled_flows
    remote = f"A.{topic_name}"
    committer = Consumer({"bootstrap.servers": b, "group.id": flow.progress_group})
    try:
        committer.commit(offsets=[progress_offset(remote, 0, 20, new_id)], asynchronous=False)
    finally:
        committer.close()
    notices = _run_until_copied(config, spark, b, remote, 60 + 30 + 50)

    copies = read_offsets(b, remote, 2, 140, 60)
    values = {p: [rec.value for _, rec in rows] for p, rows in copies.items()}
    assert values[0] == [f"old-0-{i}".encode() for i in range(30)] + [
        f"new-0-{i}".encode() for i in range(20, 50)
    ]
    assert values[1] == [f"old-1-{i}".encode() for i in range(30)] + [
        f"new-1-{i}".encode() for i in range(50)
    ]
    said = [n for n in notices if topic_name in n and "position in partition(s)" in n]
    assert said and all("partition(s) 1 was in" in n for n in said), notices
    assert old_id in said[0] and new_id in said[0], said
    assert not any(f"{topic_name} partition 0:" in n for n in notices), notices


def _run_until_copied(config: Path, spark: Any, b: str, remote: str, records: int) -> list[str]:
    """A continuous run until `remote` on B holds `records` copies; what it said."""
    notices: list[str] = []
    runner = Runner(load_config(config), spark=spark, on_notice=notices.append)
    failures: list[BaseException] = []

    def watch() -> None:
        try:
            wait_for(lambda: _count(b, remote) >= records, 120, "the new topic copied")
        except BaseException as exc:
            failures.append(exc)
        finally:
            runner.request_stop()

    beside = threading.Thread(target=watch, daemon=True)
    beside.start()
    runner.run()
    beside.join(30)
    if failures:
        raise failures[0]
    return notices


def _count(bootstrap: str, topic: str) -> int:
    from tests.integration.kafka_helpers import record_count

    return record_count(bootstrap, topic)
