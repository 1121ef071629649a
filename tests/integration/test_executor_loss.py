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

from pathlib import Path
from typing import Any

import pytest

from ferry.local import spark as local_spark
from ferry.local.cluster import LocalCluster
from tests.chaos.audit import NO_FAULTS
from tests.integration.executor_faults import (
    PARTITIONS,
    PROGRESS,
    assert_ran_again,
    copying,
    finish,
    progress,
    sigkill_tree,
    wait_or_fail,
)
from tests.integration.group_helpers import committed_offsets
from tests.integration.kafka_helpers import create_topic
from tests.integration.replication_setup import write_config
from tests.integration.spark_workers import (
    WORKER_CORES,
    WORKER_MEMORY,
    driver_only,
    executor_of,
    executors_in_status,
    hiding_wrapper,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(900)]


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


def positions_cover(b: str, remote_topic: str, held: dict[int, int]) -> bool:
    """The flow's committed position of every partition is at or beyond `held`'s."""
    committed = committed_offsets(b, "ferry-A-to-B")
    return all(committed.get((remote_topic, p), -1) >= offset for p, offset in held.items())


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
    with copying(tmp_path, config, a, b, topic_name) as (traffic, monitor, ferry):
        worker = spark_cluster.process("worker-1").process()
        assert worker is not None
        found = executor_of(worker)
        assert found is not None, "worker-1 runs no executor"
        killed, executor = found
        sigkill_tree(executor)
        progress(monitor, ferry, f"copying after executor {killed} was SIGKILLed")

        ferry.sigkill()  # the driver: its application ends, its executors with it
        ferry.start()
        progress(monitor, ferry, "copying after ferry run was SIGKILLed and started again")
        result = finish(traffic, monitor, ferry, a, b, topic_name)

    assert result.total("source") >= 3 * PROGRESS
    assert result.total("copies") == result.total("source")
    assert result.faults() == NO_FAULTS
    assert_ran_again(tmp_path / "events", killed)


def test_at_least_once_through_a_lost_worker_that_comes_back(
    spark_cluster: local_spark.SparkCluster,
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    config = _config(tmp_path, spark_cluster, kafka_clusters, topic_name)
    with copying(tmp_path, config, a, b, topic_name) as (traffic, monitor, ferry):
        wait_or_fail(lambda: len(executors_in_status(config)) == 2, ferry, "both executors copying")
        before = set(executors_in_status(config))
        # The bound below is at least once's promise: what was copied since the last position
        # committed is copied again. A lease commits its first position a slice after its
        # first copies were acknowledged; killed before that, its partitions are (rightly)
        # copied again from their start. So the kill waits for positions that cover what the
        # target already held.
        held = {p: monitor.next_origin.get(p, 0) for p in range(PARTITIONS)}
        wait_or_fail(
            lambda: positions_cover(b, f"A.{topic_name}", held),
            ferry,
            f"ferry's positions on B at or beyond {held}",
        )
        worker = spark_cluster.process("worker-2").process()
        assert worker is not None
        found = executor_of(worker)
        assert found is not None, "worker-2 runs no executor"
        killed = found[0]
        sigkill_tree(worker)
        progress(monitor, ferry, "copying on worker-1 alone after worker-2 was SIGKILLed")

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

        wait_or_fail(back, ferry, "an executor on the restarted worker-2 copying")
        progress(monitor, ferry, "copying on both workers again")
        result = finish(traffic, monitor, ferry, a, b, topic_name)

    assert result.total("source") >= 3 * PROGRESS
    assert (result.total("lost"), result.total("mismatched"), result.total("foreign")) == (0, 0, 0)
    # At least once: what the lost executor copied after its last commit is copied again, a
    # slice per partition at most; at this rate far less than a tenth of the records.
    duplicated = result.total("duplicated")
    print(f"duplicated: {duplicated} of {result.total('source')}")
    assert duplicated <= result.total("source") // 10
    assert_ran_again(tmp_path / "events", killed)
