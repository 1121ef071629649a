"""`ferry reconcile --export DIR`: the stranded records of a flow as Parquet, by a Spark job.

Spark's Kafka connector reads A (read_committed, headers included) over exactly the offsets
the plan found stranded in each partition, one Spark task per partition; records whose
`ferry.origin` names the target are dropped, as the plan's rule does (they came from B). One
row per record: topic, partition, offset, timestamp (ms since the epoch), key, value (binary,
null for a tombstone) and headers (an array of key/value structs, in order). The files go to
`DIR/<source>-to-<target>/`, replaced on every export; nothing is written to either cluster.
DIR is a local path, or a Hadoop filesystem URI (`hdfs://namenode:8020/stranded`, `s3a://...`)
kept exactly as given: a URI is never turned into a path (`Path("hdfs://nn/x")` would be
`hdfs:/nn/x`), and a local path is handed to Spark as a `file:` URI, so a `HADOOP_CONF_DIR`
whose default filesystem is HDFS does not move it there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ferry.audit.kafka_options import kafka_options
from ferry.audit.spark_job import audit_session
from ferry.config.model import FerryConfig
from ferry.kafka.provenance import ORIGIN_HEADER
from ferry.locations import is_uri
from ferry.ops.reconcile import ReconcilePlan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["export_directory", "export_stranded", "write_stranded"]


def export_directory(plan: ReconcilePlan, directory: str) -> str:
    """Where the flow's files go: `directory/<source>-to-<target>`, a URI kept as given, a
    local path made absolute."""
    name = f"{plan.flow.source}-to-{plan.flow.target}"
    if is_uri(directory):
        return f"{directory.rstrip('/')}/{name}"
    return str(Path(directory).resolve() / name)


def _for_spark(location: str) -> str:
    return location if is_uri(location) else Path(location).as_uri()


def write_stranded(spark: SparkSession, plan: ReconcilePlan, directory: str) -> int:
    """Write the plan's stranded records under `export_directory`; returns the rows written."""
    from pyspark.sql import functions as F

    out = _for_spark(export_directory(plan, directory))
    schema = (
        "topic string, partition int, offset long, timestamp long, key binary, value binary, "
        "headers array<struct<key: string, value: binary>>"
    )
    parts = plan.with_stranded()
    if not parts:
        spark.createDataFrame([], schema).write.mode("overwrite").parquet(out)
        return 0
    start: dict[str, dict[str, int]] = {}
    end: dict[str, dict[str, int]] = {}
    for p in parts:
        start.setdefault(p.topic, {})[str(p.partition)] = p.ranges[0].first
        end.setdefault(p.topic, {})[str(p.partition)] = p.ranges[-1].last + 1
    reader = spark.read.format("kafka")
    for key, value in kafka_options(plan.source).items():
        reader = reader.option(key, value)
    frame = (
        reader.option(
            "assign", json.dumps({t: sorted(int(p) for p in ps) for t, ps in start.items()})
        )
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "false")
        .load()
    )
    origin = F.expr(
        f"try_element_at(filter(headers, h -> h.key = '{ORIGIN_HEADER}'), 1).value"
    ).cast("string")
    from_target = F.coalesce(origin.startswith(f"{plan.target_cluster_id}|"), F.lit(False))
    rows = frame.where(~from_target).select(
        "topic",
        "partition",
        "offset",
        F.expr("unix_millis(timestamp)").alias("timestamp"),
        "key",
        "value",
        F.coalesce(
            "headers", F.expr("cast(array() as array<struct<key: string, value: binary>>)")
        ).alias("headers"),
    )
    rows.write.mode("overwrite").parquet(out)
    return int(spark.read.parquet(out).count())


def export_stranded(config: FerryConfig, plan: ReconcilePlan, directory: str) -> int:
    """`write_stranded` on a session of the audit's settings, stopped at the end."""
    spark = audit_session(config)
    try:
        return write_stranded(spark, plan, directory)
    finally:
        spark.stop()
