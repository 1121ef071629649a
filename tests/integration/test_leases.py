"""Continuous copy in leases: positions committed on the target mid-lease, leases changing
hands (a killed Python worker, a graceful stop), topics and partitions arriving mid-lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from ferry.client import translate_offsets
from ferry.config import load_config
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    record_count,
    wait_for,
)
from tests.integration.replication_setup import run_beside, run_once, write_config

COMMIT_MS = 200
# How long a SIGTERMed `ferry run` may take to end its lease, commit and exit: far more than it
# needs (a slice), so that a busy machine does not fail the test, and far less than a lease.
STOP_DEADLINE_S = 150
HEAD_START = {"ferry.head.start.enabled": "true"}  # write_config turns it off


def _config(tmp_path: Path, clusters: dict[str, LocalCluster], topics: str, **more: Any) -> Path:
    settings = {
        "ferry.lease.seconds": 120,  # longer than any test: what happens is mid-lease
        "ferry.commit.interval.ms": COMMIT_MS,
        "refresh.topics.interval.seconds": 2,
        **more,
    }
    return write_config(tmp_path, clusters, topics=topics, **settings)


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return [tp.offset for tp in answer]
    finally:
        consumer.close()


def _copies_per_origin(bootstrap: str, topic: str, partitions: int) -> Counter[Any]:
    """How many copies of each source record (partition, offset) the topic holds, read to
    its end (read_committed: aborted copies do not count)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{topic}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    copies: Counter[Any] = Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                headers = dict(msg.headers() or [])
                origin = Origin.from_bytes(headers[ORIGIN_HEADER])
                copies[(origin.partition, origin.offset)] += 1
    finally:
        consumer.close()
    assert len(at_end) == partitions, f"{topic} not read to its end within 60 s"
    return copies


def _copied(bootstrap: str, topic: str) -> int:
    """Records of a one-partition topic a read_committed consumer reads (its end offset counts
    transaction markers too)."""
    return sum(_copies_per_origin(bootstrap, topic, 1).values())


class SteadyProducer:
    """Writes `per_tick` records to each partition every 20 ms until stopped."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, per_tick: int = 2, pad: int = 0
    ) -> None:
        self.bootstrap, self.topic, self.partitions, self.per_tick = (
            bootstrap,
            topic,
            partitions,
            per_tick,
        )
        self.pad = b"." * pad  # bytes added to each value
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            records = [
                Rec(p, None, f"{self.sent + i}".encode() + self.pad, (), 0)
                for p in range(self.partitions)
                for i in range(self.per_tick)
            ]
            produce(self.bootstrap, self.topic, records)
            self.sent += len(records)
            self._stop.wait(0.02)


def test_a_lease_commits_its_position_on_the_target_while_it_runs(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, f"{i}".encode(), (), 0) for i in range(300)])
    config = _config(tmp_path, kafka_clusters, topic_name)
    remote = f"A.{topic_name}"

    def meanwhile() -> None:
        wait_for(lambda: record_count(b, remote) == 300, 120, f"{remote} copied")
        # Mid-lease (it runs 120 s): the position is on the target already, exactly the end.
        wait_for(
            lambda: _committed(b, "ferry-A-to-B", remote, 2) == [150, 150],
            30,
            "the flow's position committed in group ferry-A-to-B",
        )
        produce(a, topic_name, [Rec(i % 2, None, b"more", (), 0) for i in range(100)])
        wait_for(lambda: _committed(b, "ferry-A-to-B", remote, 2) == [200, 200], 30, "moved on")

    progress = run_beside(Runner(load_config(config), spark=spark), meanwhile)
    assert progress[0].records == 400
    copies = _copies_per_origin(b, remote, 2)
    assert len(copies) == 400 and set(copies.values()) == {1}, "each record copied once"
    # The offset runs were written by the lease too: translation knows every copy.
    group = f"app-{topic_name}"
    app = Consumer({"bootstrap.servers": a, "group.id": group})
    app.commit(
        offsets=[TopicPartition(topic_name, 0, 150), TopicPartition(topic_name, 1, 120)],
        asynchronous=False,
    )
    app.close()
    translated = translate_offsets(group, "A", a, b)
    assert translated == {(remote, 0): 150, (remote, 1): 120}


def test_the_first_lease_gives_a_lagging_partition_a_bin_of_its_own(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 4)
    # A skewed backlog: partition 2 holds 10 times what each other one does.
    backlog = {0: 200, 1: 200, 2: 2000, 3: 200}
    produce(
        a, topic_name, [Rec(p, None, b"v", (), 0) for p, n in backlog.items() for _ in range(n)]
    )
    config = _config(tmp_path, kafka_clusters, topic_name, **{"ferry.bins": 2})
    state = FlowState(tmp_path / "state" / "A-to-B")
    bins: list[list[str]] = []

    def meanwhile() -> None:
        remote = f"A.{topic_name}"
        wait_for(lambda: record_count(b, remote) == sum(backlog.values()), 120, "backlog copied")
        wait_for(lambda: len(state.executors()) > 0, 30, "the tasks' reports")
        bins.extend(
            sorted(f"{p['topic']}:{p['partition']}" for p in task.partitions)
            for task in state.running_tasks().values()
        )

    run_beside(Runner(load_config(config), spark=spark), meanwhile)
    hot = f"{topic_name}:2"
    assert sorted(bins) == sorted([[hot], [f"{topic_name}:{p}" for p in (0, 1, 3)]]), bins


def _python_workers() -> list[psutil.Process]:
    """Spark's Python workers: children of its worker daemon, itself a child of the JVM."""
    workers = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(proc.cmdline())
            parent = proc.parent()
            parent_cmdline = " ".join(parent.cmdline()) if parent else ""
        except psutil.Error:
            continue
        if "daemon" in cmdline and "daemon" in parent_cmdline:
            workers.append(proc)
    return workers


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_a_python_worker_killed_mid_lease_hands_its_lease_to_a_retry(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    eos = {"exactly.once.source.support": "enabled"} if mode == "exactly-once" else {}
    config = _config(tmp_path, kafka_clusters, topic_name, **eos)
    remote = f"A.{topic_name}"
    killed: list[int] = []
    state = FlowState(tmp_path / "state" / "A-to-B")

    with SteadyProducer(a, topic_name, 2) as producer:

        def meanwhile() -> None:
            # Killed once the copy is past the source's ends seen when the lease was planned:
            # the retry finds a position beyond them, which is no recreated topic.
            wait_for(lambda: bool(state.lease_topics()), 120, "the first lease planned")
            planned = record_count(a, topic_name)  # at least the ends the planner saw
            wait_for(lambda: record_count(b, remote) > planned + 200, 120, "copying started")
            wait_for(lambda: bool(_python_workers()), 30, "Spark's Python workers found")
            victim = _python_workers()[0]
            killed.append(victim.pid)
            victim.kill()
            sent = producer.sent
            wait_for(lambda: record_count(b, remote) >= sent + 400, 120, "copying goes on")

        progress = run_beside(Runner(load_config(config), spark=spark), meanwhile)
    assert killed
    assert progress[0].restarts == 0, "Spark retried the task; the query never failed"
    sent = producer.sent
    # Whatever was still pending when ferry stopped is copied by a bounded run.
    run_once(config, spark)
    copies = _copies_per_origin(b, remote, 2)
    assert len(copies) == sent, "every record is on the target"
    duplicated = sum(n - 1 for n in copies.values())
    if mode == "exactly-once":
        assert duplicated == 0
    else:
        # At most what was copied in one slice, at 100 records/s per partition.
        assert duplicated <= 2 * 100 * (COMMIT_MS / 1000 + 1)


def test_exactly_once_slices_commit_while_the_next_copies_without_a_retry(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 4)
    eos = {"exactly.once.source.support": "enabled", "ferry.commit.interval.ms": 100}
    # One task copies all four partitions: its slices' commits overlap its copies most.
    config = _config(tmp_path, kafka_clusters, topic_name, **eos, **{"ferry.bins": 1})
    remote = f"A.{topic_name}"
    state = FlowState(tmp_path / "state" / "A-to-B")
    attempts: set[str] = set()

    with SteadyProducer(a, topic_name, 4, per_tick=50, pad=1000) as producer:

        def meanwhile() -> None:
            wait_for(lambda: record_count(b, remote) > 30_000, 120, "copying 30,000 records")
            attempts.update(name.split("-")[1] for name in state.running_tasks())

        progress = run_beside(Runner(load_config(config), spark=spark), meanwhile)
    # Each slice's commit markers land among the next slice's copies; were they taken for
    # another writer's records, the task would fail and be retried (attempt 1, 2, ...).
    assert attempts == {"0"}, f"task attempts seen: {attempts}"
    assert progress[0].restarts == 0
    run_once(config, spark)
    copies = _copies_per_origin(b, remote, 4)
    assert len(copies) == producer.sent and set(copies.values()) == {1}


def test_topic_and_partition_added_mid_lease_are_copied_without_waiting_for_its_end(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    first, later = f"{topic_name}-first", f"{topic_name}-later"
    create_topic(a, first, 1)
    produce(a, first, [Rec(0, None, b"v", (), 0) for _ in range(50)])
    config = _config(tmp_path, kafka_clusters, f"{topic_name}-.*")

    def meanwhile() -> None:
        wait_for(lambda: record_count(b, f"A.{first}") == 50, 120, f"A.{first} copied")
        create_topic(a, later, 2)
        produce(a, later, [Rec(i % 2, None, b"new", (), 0) for i in range(40)])
        wait_for(lambda: record_count(b, f"A.{later}") == 40, 60, f"A.{later} copied")
        admin = AdminClient({"bootstrap.servers": a})
        admin.create_partitions([NewPartitions(first, 3)])[first].result(30)
        produce(a, first, [Rec(2, None, b"p2", (), 0) for _ in range(30)])
        wait_for(lambda: record_count(b, f"A.{first}") == 80, 60, "the new partition copied")

    # The lease runs 120 s; both changes were copied within the test's 60 s waits.
    progress = run_beside(Runner(load_config(config), spark=spark), meanwhile)
    assert progress[0].records == 120


@pytest.mark.processes
def test_sigterm_mid_lease_ends_it_commits_and_exits_with_nothing_copied_twice(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    # An hour's lease: an exit within STOP_DEADLINE_S of the signal did not wait it out.
    config = _config(tmp_path, kafka_clusters, topic_name, **{"ferry.lease.seconds": 3600})
    remote = f"A.{topic_name}"
    ferry = [sys.executable, "-m", "ferry", "run", "-c", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "ferry.log"
    with SteadyProducer(a, topic_name, 2) as producer, log.open("w") as out:
        proc = subprocess.Popen(ferry, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(lambda: record_count(b, remote) > 300, 180, f"{remote} copying")
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running {STOP_DEADLINE_S} s after SIGTERM (1 h lease)")
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, log.read_text()[-3000:]
    # A clean stop: the position committed on the target is exactly what was copied.
    stopped = _copies_per_origin(b, remote, 2)
    assert stopped, "copied before the stop"
    assert set(stopped.values()) == {1}, "nothing copied twice before the stop"
    committed = _committed(b, "ferry-A-to-B", remote, 2)
    copied_up_to = [sum(1 for p, _ in stopped if p == partition) for partition in (0, 1)]
    ferry_said = log.read_text()[-3000:]
    assert committed == copied_up_to, (committed, copied_up_to, ferry_said)
    assert stopped.keys() == {(p, o) for p in (0, 1) for o in range(committed[p])}, ferry_said
    run_once(config, spark)  # the rest, from the position the stopped lease committed
    copies = _copies_per_origin(b, remote, 2)
    assert len(copies) == producer.sent
    assert set(copies.values()) == {1}, "nothing copied twice across the stop"


def test_leases_hand_over_without_losing_or_repeating_a_record_and_the_gap_is_measured(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    config = _config(tmp_path, kafka_clusters, topic_name, **{"ferry.lease.seconds": 3})
    state = FlowState(tmp_path / "state" / "A-to-B")
    with SteadyProducer(a, topic_name, 2) as producer:

        def meanwhile() -> None:
            wait_for(lambda: state.stats().get("lease_gaps", 0) >= 3, 120, "four leases")

        run_beside(Runner(load_config(config), spark=spark), meanwhile)
    stats = state.stats()
    # Measured between leases of this run: a micro-batch's planning and task launch, a
    # duration (not a clock reading), whatever the machine's load makes it.
    assert 0 < stats["lease_gap_seconds"] <= stats["lease_gap_max_seconds"] < 120
    run_once(config, spark)
    copies = _copies_per_origin(b, f"A.{topic_name}", 2)
    assert len(copies) == producer.sent
    assert set(copies.values()) == {1}, "no record copied twice at a lease's end"


@pytest.mark.processes
@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_the_driver_copies_while_spark_starts_and_the_first_lease_takes_over_exactly(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    eos = {"exactly.once.source.support": "enabled"} if mode == "exactly-once" else {}
    config = _config(tmp_path, kafka_clusters, topic_name, **HEAD_START, **eos)
    remote = f"A.{topic_name}"
    state = FlowState(tmp_path / "state" / "A-to-B")
    first_lease = state.lease_checkpoint / "offsets" / "0"
    ferry = [sys.executable, "-m", "ferry", "run", "-c", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "ferry.log"
    with SteadyProducer(a, topic_name, 2) as producer, log.open("w") as out:
        # A `ferry run` of its own: its Spark starts from nothing, as a user's does.
        proc = subprocess.Popen(ferry, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(lambda: record_count(b, remote) > 0, 120, f"{remote} copying")
            assert not first_lease.exists(), "copied before Spark planned its first lease"
            wait_for(
                lambda: first_lease.exists() and not state.head_start_marker.exists(),
                180,
                "the first lease took over",
            )
            taken_over = record_count(b, remote)
            wait_for(lambda: record_count(b, remote) > taken_over + 200, 60, "the lease copying")
            proc.send_signal(signal.SIGTERM)
            proc.wait(STOP_DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, log.read_text()[-3000:]
    run_once(config, spark)  # the rest, from the position the stopped lease committed
    copies = _copies_per_origin(b, remote, 2)
    assert len(copies) == producer.sent, "nothing lost at the handover"
    assert set(copies.values()) == {1}, "nothing copied twice at the handover"


def test_a_once_run_starts_with_the_head_start_and_its_batches_resume_after_it(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, f"{i}".encode(), (), 0) for i in range(3000)])
    config = _config(tmp_path, kafka_clusters, topic_name, **HEAD_START)
    remote = f"A.{topic_name}"
    with SteadyProducer(a, topic_name, 2) as producer:
        wait_for(lambda: producer.sent > 200, 30, "traffic")
        progress = run_once(config, spark)["A->B"]
    assert progress.copier == "native", "the head start's copy loop is reported"
    copies = _copies_per_origin(b, remote, 2)
    assert len(copies) == progress.records, "the summary counts the head start's copies"
    assert len(copies) >= 3200, "everything there at start"
    assert set(copies.values()) == {1}, "the batch resumed where the head start committed"
    # The head start wrote offset runs too: translation knows every copy.
    group = f"app-{topic_name}"
    app = Consumer({"bootstrap.servers": a, "group.id": group})
    app.commit(offsets=[TopicPartition(topic_name, 0, 1500)], asynchronous=False)
    app.close()
    assert translate_offsets(group, "A", a, b) == {(remote, 0): 1500}


@pytest.mark.processes
def test_a_topic_deleted_while_ferry_is_down_does_not_hold_the_replayed_lease(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    # SIGKILLed mid-lease, a run leaves its planned batch in Spark's checkpoint; the next run
    # replays that batch first. When one of its topics was deleted meanwhile, the source
    # answers that it does not exist: the lease copies the rest and the flow goes on (it used
    # to take that answer for no answer and retry the batch for ever).
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    keep, doomed = f"{topic_name}-keep", f"{topic_name}-doomed"
    for topic in (keep, doomed):
        create_topic(a, topic, 1)
        produce(a, topic, [Rec(0, None, b"v", (), 0) for _ in range(20)])
    config = _config(
        tmp_path,
        kafka_clusters,
        f"{topic_name}-.*",
        **{"exactly.once.source.support": "enabled", "ferry.lease.seconds": 3600},
    )
    ferry = [sys.executable, "-m", "ferry", "run", "-c", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "ferry.log"
    with log.open("w") as out:
        proc = subprocess.Popen(ferry, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(
                lambda: _copied(b, f"A.{keep}") == 20 and _copied(b, f"A.{doomed}") == 20,
                180,
                "both topics copied",
            )
        finally:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.wait(30)
    admin = AdminClient({"bootstrap.servers": a})
    admin.delete_topics([doomed])[doomed].result(30)
    wait_for(lambda: doomed not in admin.list_topics(timeout=10).topics, 60, f"{doomed} deleted")
    with log.open("a") as out:
        proc = subprocess.Popen(ferry, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            said = f"topic(s) {doomed} no longer exist on A: not copied by this lease"
            wait_for(lambda: said in log.read_text(), 180, "the replayed lease dropping it")
            produce(a, keep, [Rec(0, None, b"after", (), 0) for _ in range(10)])
            wait_for(lambda: _copied(b, f"A.{keep}") == 30, 120, f"{keep} copied on")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
    assert _copies_per_origin(b, f"A.{keep}", 1) == Counter({(0, o): 1 for o in range(30)})
    assert f"could not read the id of topic {doomed}" not in log.read_text()
