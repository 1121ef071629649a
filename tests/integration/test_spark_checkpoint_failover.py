"""A Spark Structured Streaming query reading Kafka, failed over to the replica by rewriting its
checkpoint (`ferry failover spark-checkpoint`), then failed back: every acknowledged record
lands in its exactly-once file sink once, by id.

The source is a cluster of this module's own (P), really stopped; the target is the session's
B. A producer writes ids to P throughout. The query (Kafka source, a JSON file sink with its
`_spark_metadata` log) is stopped mid-stream; ferry copies P to B; the query runs one more
batch on P past what ferry copied, and Spark stopping before it committed that batch is
reproduced by removing it from `commits/`, in two cases:
- the sink's job failed too (the batch is not in `_spark_metadata/` either), and the batch's
  records never reached B: ferry removes the planned batch, Spark plans it again over B;
- the sink committed it (a crash between the two logs) after ferry copied its records too:
  ferry translates its end offsets, and the sink skips the batch when Spark runs it again;
- the sink committed it and its last records never reached B: ferry clamps its end offsets
  to the end of the copies (the sink skips the re-run) and says which records were read but
  never copied; after the failback exactly those are read a second time, as said.
P is stopped; the checkpoint is moved to B and the query resumes on B's copies; then P comes
back and the checkpoint is moved back to P, where the query reads what never reached B.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from ferry.client import fail_over_spark_checkpoint
from ferry.engine.spark.checkpoint_files import HadoopStorage
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import module_clusters
from tests.integration.kafka_helpers import create_topic, read_all, record_count, wait_for
from tests.integration.replication_setup import write_config

pytestmark = [pytest.mark.integration, pytest.mark.dr]

private = module_clusters("P")
PARTITIONS = 2


class Writer:
    """Ids "0", "1", ... written to a topic until stopped; those acknowledged are kept."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: list[str] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error: Any, msg: Any) -> None:
        if error is None:
            self.acked.append(msg.value().decode())
        else:
            self.errors.append(str(error))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            for _ in range(20):
                self._producer.produce(
                    self._topic,
                    str(n).encode(),
                    partition=n % PARTITIONS,
                    on_delivery=self._delivered,
                )
                n += 1
            self._producer.flush(30)  # 20 at a time, each batch acknowledged before the next
            self._stop.wait(0.05)  # about 400 records a second: the producer's pace

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive() and not self.errors, self.errors
        return list(self.acked)


def start_query(
    spark: Any, bootstrap: str, subscribe: str, checkpoint: Path, output: Path, **trigger: Any
) -> Any:
    """The query: small batches every 200 ms, or (`trigger`) as given, in one batch."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", subscribe)
        .option("startingOffsets", "earliest")
    )
    if not trigger:
        reader = reader.option("maxOffsetsPerTrigger", 300)
    stream = reader.load().selectExpr("CAST(value AS STRING) AS id", "topic", "partition", "offset")
    return (
        stream.writeStream.format("json")
        .option("checkpointLocation", str(checkpoint))
        .trigger(**(trigger or {"processingTime": "200 milliseconds"}))
        .start(str(output))
    )


def run_to_end(spark: Any, bootstrap: str, subscribe: str, checkpoint: Path, output: Path) -> None:
    query = start_query(spark, bootstrap, subscribe, checkpoint, output)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None, query.exception()


def output_ids(spark: Any, output: Path) -> Counter[str]:
    """The ids the sink committed (read through its `_spark_metadata` log)."""
    return Counter(row.id for row in spark.read.json(str(output)).select("id").collect())


def committed(checkpoint: Path) -> list[int]:
    return sorted(
        int(n) for n in (p.name for p in (checkpoint / "commits").iterdir()) if n.isdigit()
    )


def sink_log(output: Path) -> list[int]:
    names = (p.name.removesuffix(".compact") for p in (output / "_spark_metadata").iterdir())
    return sorted(int(n) for n in names if n.isdigit())


def crash(checkpoint: Path, output: Path, batch: int, *, sink_committed: bool) -> None:
    """The state Spark leaves when it stops during batch `batch`: planned, not in commits/;
    in the sink's log too when the sink committed it (a crash between the two logs), not
    when the sink's job failed."""
    logs = [checkpoint / "commits"] + ([] if sink_committed else [output / "_spark_metadata"])
    for log in logs:
        for name in (str(batch), f"{batch}.compact"):
            (log / name).unlink(missing_ok=True)
            (log / f".{name}.crc").unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("sink_committed", "planned"),
    [(False, "removed"), (True, "translated"), (True, "clamped")],
    ids=["sink-did-not-write-the-planned-batch", "sink-wrote-it", "sink-wrote-it-never-copied"],
)
def test_a_spark_query_fails_over_to_the_copies_and_back_reading_each_record_once(
    sink_committed: bool,
    planned: str,
    private: dict[str, LocalCluster],
    kafka_clusters: dict[str, LocalCluster],
    spark: Any,
    tmp_path: Path,
) -> None:
    p_broker, b = private["P"], kafka_clusters["B"].bootstrap
    p = p_broker.bootstrap
    topic = f"events-{uuid.uuid4().hex[:8]}"
    remote = f"P.{topic}"
    create_topic(p, topic, PARTITIONS)
    config = write_config(
        tmp_path, {"P": p_broker, "B": kafka_clusters["B"]}, flows=("P->B",), topics=topic
    )
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "out"

    writer = Writer(p, topic)
    try:
        # The query on P, stopped mid-stream after a few batches while the producer writes on.
        query = start_query(spark, p, topic, checkpoint, output)
        try:
            wait_for(
                lambda: (checkpoint / "commits").is_dir() and len(committed(checkpoint)) >= 3,
                120,
                "3 batches committed on P",
            )
        finally:
            query.stop()
        copied = run_ferry("run", "-c", str(config), "--once")
        assert copied.returncode == 0, copied.stderr
        # One more batch on P, past what ferry copied; Spark stops before committing it.
        wait_for(
            lambda: record_count(p, topic) > record_count(b, remote) + 50, 60, "P ahead of its copy"
        )
        run = start_query(spark, p, topic, checkpoint, output, availableNow=True)
        assert run.awaitTermination(120), "the one batch on P did not end in 120 s"
        assert run.exception() is None, run.exception()
        last = committed(checkpoint)[-1]
        assert sink_log(output)[-1] == last
        if planned == "translated":  # ferry copies the batch's records too: its ends all map
            again = run_ferry("run", "-c", str(config), "--once")
            assert again.returncode == 0, again.stderr
        crash(checkpoint, output, last, sink_committed=sink_committed)
    finally:
        acked = writer.stop()
    before_failover = output_ids(spark, output)
    p_broker.stop()  # P is lost

    # Failover: dry run first (writes nothing), then the rewrite.
    files_before = {f: f.read_bytes() for f in checkpoint.rglob("*") if f.is_file()}
    dry = run_ferry_failover(config, checkpoint, output, "P", "B", "--dry-run", "--json")
    assert dry["planned_batch"] == last and dry["planned_batch_action"] == planned
    assert dry["committed_batch"] == last - 1 and dry["subscribe"] == remote
    assert {f: f.read_bytes() for f in checkpoint.rglob("*") if f.is_file()} == files_before
    moved = run_ferry_failover(config, checkpoint, output, "P", "B", "--json")
    assert moved["subscribe"] == remote and not moved["dry_run"]
    backup = checkpoint / moved["backup"]
    assert (backup / f"offsets/{last}").read_bytes() == files_before[checkpoint / f"offsets/{last}"]
    assert (checkpoint / f"offsets/{last}").exists() == (planned != "removed")

    run_to_end(spark, b, moved["subscribe"], checkpoint, output)
    on_b = [
        rec.value.decode()
        for rec in read_all(b, remote, PARTITIONS, record_count(b, remote))
        if rec.value
    ]
    after_failover = output_ids(spark, output)
    assert set(on_b) <= set(acked)
    assert all(n == 1 for n in after_failover.values()), [
        i for i, n in after_failover.items() if n > 1
    ][:10]
    # Every record that reached B, once, and what the sink held before (the clamped planned
    # batch: records read on P that never reached B), once.
    assert set(after_failover) == set(on_b) | set(before_failover)
    read_but_not_copied = set(before_failover) - set(on_b)
    assert bool(read_but_not_copied) == (planned == "clamped")
    if planned == "clamped":
        assert any("were read but never replicated" in note for note in moved["notes"])

    # Failback: P is back; the client library moves the checkpoint to P, once through
    # Hadoop's FileSystem (as for a checkpoint on HDFS or S3), once by plain file I/O.
    p_broker.restart()
    where = HadoopStorage(spark, checkpoint.as_uri()) if sink_committed else checkpoint
    back = fail_over_spark_checkpoint(config, where, "B", "P")
    assert (checkpoint / back.backup / f"offsets/{back.committed}").is_file()
    assert back.subscribe == topic and back.planned is None
    run_to_end(spark, p, back.subscribe, checkpoint, output)
    final = output_ids(spark, output)
    assert set(final) == set(acked)  # every acknowledged record
    # once; except, after a clamp, those read on P that never reached B are read again on P
    # (the note said so): exactly those, exactly twice.
    assert {i for i, n in final.items() if n != 1} == read_but_not_copied
    assert all(final[i] == 2 for i in read_but_not_copied)


def run_ferry_failover(
    config: Path, checkpoint: Path, output: Path, source: str, target: str, *extra: str
) -> dict[str, Any]:
    """`ferry failover spark-checkpoint` through the command's body, as the CLI calls it."""
    from ferry.cli.common import load
    from ferry.cli.spark_checkpoint_command import spark_checkpoint_failover

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        spark_checkpoint_failover(
            load(config),
            str(checkpoint),
            source,
            target,
            sink_log=str(output / "_spark_metadata"),
            dry_run="--dry-run" in extra,
            as_json="--json" in extra,
        )
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 1, lines
    result: dict[str, Any] = json.loads(lines[0])
    return result
