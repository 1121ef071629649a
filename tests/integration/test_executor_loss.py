"""Executors and workers lost while `ferry run` copies steady traffic on a Spark cluster.

The session's standalone cluster (`spark_cluster`: two one-core workers that cannot see this
virtualenv) runs a continuous flow in leases while a producer writes into A. Its state
directory is hidden from the workers too, as on machines of their own: the leases hear from
the driver when they are over (a re-plan, a stop) and tell it what they copied. The faults:

- exactly-once: one executor SIGKILLed (its JVM and its Python workers), then the driver
  (`ferry run`) SIGKILLed and started again: every record once, in order;
- at-least-once: a whole worker SIGKILLed (with its executor), then started again: no record
  lost, the duplicates counted, and the worker that came back copies again.

Spark's own event log says what it did with the lost tasks; the target, read by origin
(`ferry.origin`), says what arrived. Several minutes, so behind the `cluster` marker:
`make test-cluster`.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from ferry.local import spark as local_spark
from ferry.local.cluster import LocalCluster
from tests.chaos.audit import Audit, audit, rewinds
from tests.chaos.faults import FerryProcess
from tests.chaos.observer import LagMonitor, read_copies, read_source
from tests.chaos.traffic import SteadyProducer
from tests.integration.kafka_helpers import create_topic
from tests.integration.replication_setup import write_config
from tests.integration.spark_workers import (
    WORKER_CORES,
    WORKER_MEMORY,
    driver_only,
    executor_of,
    executors_in_status,
    hiding_wrapper,
    spark_events,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(900)]

PARTITIONS = 4
RATE = 200  # records a second into A, round-robin over the partitions
PROGRESS = 600  # copies that must arrive after each fault before the next one
DEADLINE = 300.0  # seconds for any of those steps, on a busy 2-core machine


def _config(
    tmp_path: Path, cluster: local_spark.SparkCluster, brokers: Any, topic: str, **more: Any
) -> Path:
    events = tmp_path / "events"
    events.mkdir()
    return write_config(
        tmp_path,
        brokers,
        topics=topic,
        **{
            # Where the executors cannot see it, as on machines of their own: the leases learn
            # that they are over, and report what they copied, from the driver only.
            "ferry.state.dir": driver_only(Path(cluster.directory)) / tmp_path.name,
            "spark.master": cluster.master_url,
            "spark.executor.cores": WORKER_CORES,
            "spark.executor.memory": "512m",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
            # Written as events come, so a log cut by the driver's SIGKILL still has them.
            "spark.eventLog.buffer.kb": "1k",
            **more,
        },
    )


def _wait(condition: Callable[[], bool], ferry: FerryProcess, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if not ferry.alive():
            ferry._running()  # raises with the end of its log
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {DEADLINE:.0f}s")
        time.sleep(0.2)


def _progress(monitor: LagMonitor, ferry: FerryProcess, what: str) -> None:
    """PROGRESS more copies, and on every partition: a backlog the surviving executor catches
    up on would bring the copies alone, before the lost executor's partitions move again."""
    target = monitor.seen + PROGRESS
    each = {p: monitor.next_origin.get(p, 0) + PROGRESS // PARTITIONS for p in range(PARTITIONS)}
    _wait(lambda: monitor.seen >= target and monitor.reached(each), ferry, what)


def _sigkill_tree(process: psutil.Process) -> None:
    """SIGKILL a process and everything under it (an executor's Python workers, a worker's
    executor), children first so none is re-parented and missed."""
    family = [*process.children(recursive=True), process]
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(signal.SIGKILL)
    psutil.wait_procs(family, timeout=30)


def _finish(
    traffic: SteadyProducer, monitor: LagMonitor, ferry: FerryProcess, a: str, b: str, topic: str
) -> Audit:
    """Stop the traffic, wait until the target holds every source record, stop ferry; audit."""
    traffic.stop()
    source = read_source(a, topic, PARTITIONS)
    ends = {p: records[-1][0] + 1 if records else 0 for p, records in source.items()}
    _wait(lambda: monitor.reached(ends), ferry, "the catch-up")
    assert ferry.sigterm() == 0
    copies = read_copies(b, f"A.{topic}", PARTITIONS)
    result = audit(source, copies)
    print({n: result.total(n) for n in ("source", "copies", "lost", "duplicated", "reordered")})
    for rewind in rewinds(copies):  # where duplicates come from, should a bound fail
        print(rewind)
    return result


def _executor(event: dict[str, Any]) -> str:
    return str(event["Task Info"]["Executor ID"])


def _lost_and_retried(events: Path, executor: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The tasks Spark lost with `executor`, and the later attempts of those tasks (stage,
    index, attempt, executor) it started elsewhere."""
    lost = [
        e
        for e in spark_events(events, "SparkListenerTaskEnd")
        if e["Task End Reason"]["Reason"] == "ExecutorLostFailure"
        and e["Task Info"]["Executor ID"] == executor
    ]
    retried = [
        (
            s["Stage ID"],
            s["Task Info"]["Index"],
            s["Task Info"]["Attempt"],
            s["Task Info"]["Executor ID"],
        )
        for s in spark_events(events, "SparkListenerTaskStart")
        for e in lost
        if s["Stage ID"] == e["Stage ID"]
        and s["Task Info"]["Index"] == e["Task Info"]["Index"]
        and s["Task Info"]["Attempt"] > e["Task Info"]["Attempt"]
    ]
    return lost, retried


@contextlib.contextmanager
def _copying(
    tmp_path: Path, config: Path, a: str, b: str, topic: str
) -> Iterator[tuple[SteadyProducer, LagMonitor, FerryProcess]]:
    """Traffic into A, a watch on B, and `ferry run` started; all stopped on the way out."""
    traffic = SteadyProducer(a, topic, PARTITIONS, RATE).start()
    monitor = LagMonitor(b, f"A.{topic}", PARTITIONS).start()
    ferry = FerryProcess(config, tmp_path)
    try:
        ferry.start()
        _progress(monitor, ferry, "the first copies")
        yield traffic, monitor, ferry
    finally:
        traffic.stop()
        monitor.stop()
        if ferry.alive():
            ferry.sigkill()


def _assert_ran_again(events: Path, killed: str) -> None:
    """Spark lost a task with executor `killed` and started it again on another executor."""
    lost, retried = _lost_and_retried(events, killed)
    print(f"lost with executor {killed}: {len(lost)} task(s); started again: {retried}")
    assert lost, f"Spark's event log has no task lost with executor {killed}"
    assert retried and all(r[3] != killed for r in retried), retried


def test_exactly_once_through_a_lost_executor_and_a_killed_driver(
    spark_cluster: local_spark.SparkCluster,
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    config = _config(
        tmp_path,
        spark_cluster,
        kafka_clusters,
        topic_name,
        **{"exactly.once.source.support": "enabled"},
    )
    with _copying(tmp_path, config, a, b, topic_name) as (traffic, monitor, ferry):
        worker = spark_cluster.process("worker-1").process()
        assert worker is not None
        found = executor_of(worker)
        assert found is not None, "worker-1 runs no executor"
        killed, executor = found
        _sigkill_tree(executor)
        _progress(monitor, ferry, f"copying after executor {killed} was SIGKILLed")

        ferry.sigkill()  # the driver: its application ends, its executors with it
        ferry.start()
        _progress(monitor, ferry, "copying after ferry run was SIGKILLed and started again")
        result = _finish(traffic, monitor, ferry, a, b, topic_name)

    assert result.total("source") >= 3 * PROGRESS
    assert result.total("copies") == result.total("source")
    kinds = ("lost", "duplicated", "reordered", "mismatched", "foreign")
    assert {kind: result.total(kind) for kind in kinds} == dict.fromkeys(kinds, 0)
    _assert_ran_again(tmp_path / "events", killed)


def test_at_least_once_through_a_lost_worker_that_comes_back(
    spark_cluster: local_spark.SparkCluster,
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    config = _config(tmp_path, spark_cluster, kafka_clusters, topic_name)
    with _copying(tmp_path, config, a, b, topic_name) as (traffic, monitor, ferry):
        _wait(lambda: len(executors_in_status(config)) == 2, ferry, "both executors copying")
        before = set(executors_in_status(config))
        worker = spark_cluster.process("worker-2").process()
        assert worker is not None
        found = executor_of(worker)
        assert found is not None, "worker-2 runs no executor"
        killed = found[0]
        _sigkill_tree(worker)
        _progress(monitor, ferry, "copying on worker-1 alone after worker-2 was SIGKILLed")

        local_spark.restart_worker(
            spark_cluster,
            2,
            cores=WORKER_CORES,
            memory=WORKER_MEMORY,
            wrap_worker=hiding_wrapper(Path(spark_cluster.directory)),
        )

        def back() -> bool:
            copied = executors_in_status(config).items()
            return any(e not in before and s["records"] > 0 for e, s in copied)

        _wait(back, ferry, "an executor on the restarted worker-2 copying")
        _progress(monitor, ferry, "copying on both workers again")
        result = _finish(traffic, monitor, ferry, a, b, topic_name)

    assert result.total("source") >= 3 * PROGRESS
    assert (result.total("lost"), result.total("mismatched"), result.total("foreign")) == (0, 0, 0)
    # At least once: what the lost executor copied after its last commit is copied again, a
    # slice per partition at most; at this rate far less than a tenth of the records.
    duplicated = result.total("duplicated")
    print(f"duplicated: {duplicated} of {result.total('source')}")
    assert duplicated <= result.total("source") // 10
    _assert_ran_again(tmp_path / "events", killed)
