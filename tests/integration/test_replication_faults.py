"""Faults: a killed `ferry run` loses nothing; a record the target refuses halts precisely.

A run that is killed or signalled is a process of its own (and its own Spark); every other
`ferry run --once` runs in this process on the session's Spark (tests/ferry_cli.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from ferry.errors import ReplicationError
from ferry.kafka.provenance import Origin
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    read_offsets,
    record_count,
    wait_for,
)
from tests.integration.replication_setup import origin_of, run_once, write_config

BATCH = 5000


def _start_ferry(*args: str, log: Path) -> subprocess.Popen[bytes]:
    """`ferry run` in its own process group, so a kill takes Spark's JVM and workers too."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ferry", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.mark.processes
def test_sigkill_mid_copy_then_restart_loses_nothing(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    total = 100_000
    create_topic(a, topic_name, 4)
    produce(
        a, topic_name, [Rec(i % 4, None, b"x" * 100 + str(i).encode(), (), 0) for i in range(total)]
    )
    # Bounded micro-batches: the loss and replay bound is one batch. (A lease's bound is one
    # commit interval of traffic, a whole backlog here; test_leases kills a lease's worker.)
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{"ferry.batch.max.records": BATCH, "ferry.lease.seconds": 0},
    )
    ferry = _start_ferry("run", "-c", str(config), log=tmp_path / "run.log")
    try:
        wait_for(
            lambda: record_count(b, f"A.{topic_name}") >= BATCH,
            120,
            f"ferry run copied a first batch (log: {(tmp_path / 'run.log').read_text()[-2000:]})",
        )
    finally:
        os.killpg(ferry.pid, signal.SIGKILL)
        ferry.wait(30)
    copied_before_restart = record_count(b, f"A.{topic_name}")
    assert copied_before_restart < total, "the kill came too late to interrupt the copy"

    rerun = run_ferry("run", "-c", str(config), "--once", timeout=300)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr

    on_target = record_count(b, f"A.{topic_name}")
    copied = read_offsets(b, f"A.{topic_name}", 4, on_target)
    duplicates = 0
    for p in range(4):
        seen: list[int] = []
        for _, rec in copied[p]:
            offset = Origin.from_bytes(origin_of(rec)).offset
            if offset in seen[-BATCH:] or (seen and offset <= seen[-1]):
                duplicates += 1  # a replayed copy: at-least-once after a hard kill
            else:
                seen.append(offset)
        assert seen == list(range(total // 4)), f"partition {p}: missing or reordered records"
    print(f"SIGKILL after {copied_before_restart} copied records caused {duplicates} duplicates")
    assert duplicates <= BATCH + 4  # at most the one batch in flight, replayed (+1 per partition)


def test_record_too_large_for_target_halts_then_rerun_completes(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    create_topic(b, f"A.{topic_name}", 1, **{"max.message.bytes": "20000"})
    records = [Rec(0, b"k", f"small-{i}".encode(), (), 0) for i in range(10)]
    records[5] = Rec(0, b"k", b"L" * 50_000, (), 0)
    produce(a, topic_name, records)
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)

    halted = run_ferry("run", "-c", str(config), "--once", timeout=300)

    assert halted.returncode == 1, halted.stdout + halted.stderr
    message = halted.stderr
    assert f"cluster A, topic {topic_name}, partition 0, offset 5:" in message, message
    assert f"max.message.bytes of topic A.{topic_name} on B" in message, message
    assert "Traceback" not in message
    copied_offsets = {
        Origin.from_bytes(origin_of(r)).offset
        for _, r in read_offsets(b, f"A.{topic_name}", 1, record_count(b, f"A.{topic_name}"))[0]
    }
    assert all(offset < 5 for offset in copied_offsets), "copied past the refused record"

    admin = AdminClient({"bootstrap.servers": b})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        f"A.{topic_name}",
        incremental_configs=[
            ConfigEntry("max.message.bytes", "200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)

    rerun = run_ferry("run", "-c", str(config), "--once", timeout=300)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    on_target = read_offsets(b, f"A.{topic_name}", 1, record_count(b, f"A.{topic_name}"))[0]
    assert {Origin.from_bytes(origin_of(r)).offset for _, r in on_target} == set(range(10))
    assert [r.value for _, r in on_target][-5:] == [r.value for r in records[5:]]


@pytest.mark.processes
def test_unreachable_target_is_reported_and_retried(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    unreachable = {"A": kafka_clusters["A"], "B": _Closed()}
    config = write_config(tmp_path, unreachable, topics=topic_name)  # type: ignore[arg-type]
    log = tmp_path / "run.log"
    ferry = _start_ferry("run", "-c", str(config), "--once", log=log)
    try:
        wait_for(
            lambda: "retrying until it answers" in log.read_text(),
            120,
            "ferry reported the unreachable cluster and retries",
        )
        assert "cluster B (127.0.0.1:9) is unreachable" in log.read_text()
    finally:
        os.killpg(ferry.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while ferry.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if ferry.poll() is None:
            os.killpg(ferry.pid, signal.SIGKILL)
    assert ferry.wait(30) != 0


class _Closed:
    """A cluster nobody listens on (port 9, discard, is closed on loopback)."""

    bootstrap = "127.0.0.1:9"


def test_remote_topic_that_cannot_be_created_stops_the_flow_with_the_fix(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, [Rec(0, None, b"v", (), 0)])
    config = write_config(tmp_path, kafka_clusters, topics=topic_name, **{"replication.factor": 3})

    with pytest.raises(ReplicationError) as stopped:
        run_once(config, spark)

    message = str(stopped.value)
    assert message.startswith(f"cluster B, topic A.{topic_name}: could not create topic"), message
    assert "INVALID_REPLICATION_FACTOR" in message
    assert "set replication.factor (or A->B.replication.factor) to at most" in message
    assert record_count(b, f"A.{topic_name}") == 0


@pytest.mark.processes
def test_sigterm_stops_after_the_current_batch_and_exits_zero(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, b"v" * 200, (), 0) for i in range(20_000)])
    config = write_config(
        tmp_path, kafka_clusters, topics=topic_name, **{"ferry.batch.max.records": 2000}
    )
    log = tmp_path / "run.log"
    ferry = _start_ferry("run", "-c", str(config), log=log)
    try:
        wait_for(lambda: record_count(b, f"A.{topic_name}") > 0, 120, "a first batch copied")
        ferry.send_signal(signal.SIGTERM)  # the ferry process only, as a service manager does
        assert ferry.wait(120) == 0, log.read_text()[-3000:]
    finally:
        if ferry.poll() is None:
            os.killpg(ferry.pid, signal.SIGKILL)
    assert "stopping after the current batch" in log.read_text()
    # Every batch that started was finished and committed: a rerun copies only the rest.
    copied = record_count(b, f"A.{topic_name}")
    rerun = run_ferry("run", "-c", str(config), "--once", "--json", timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout.splitlines()[-1])["A->B"]["records"] == 20_000 - copied
    assert record_count(b, f"A.{topic_name}") == 20_000
