"""The audit as a Spark batch job: both clusters read with Spark's Kafka connector, joined.

`audit_flow` reads the offsets a plan names (audit/plan.py; read_committed; keys and values
are not read) and applies the rules of diff.py as DataFrame operations: the work is spread
over the source and remote partitions, and the driver collects only per-bucket counts and at
most `range_limit` ranges of each kind.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ferry.audit.diff import merge_ranges
from ferry.audit.kafka_options import kafka_options
from ferry.audit.model import FlowPlan, Offsets, TopicResult
from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.kafka.provenance import ORIGIN_HEADER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["audit_flow", "audit_flows", "audit_session"]


def _read(spark: SparkSession, cluster: ClusterConfig, offsets: dict[str, Offsets]) -> DataFrame:
    """topic, partition, offset, ts (ms), append_ts (ts when the broker stamped it with
    LogAppendTime, else null) and the origin header of the records in `offsets`
    ({topic: {partition: (first, end)}}), all topics in one read."""
    from pyspark.sql import functions as F

    parts = {
        topic: {p: o for p, o in sorted(by_partition.items()) if o[1] > o[0]}
        for topic, by_partition in sorted(offsets.items())
    }
    parts = {topic: found for topic, found in parts.items() if found}
    if not parts:
        schema = "topic string, partition int, offset long, ts long, append_ts long, origin string"
        return spark.createDataFrame([], schema)
    reader = spark.read.format("kafka")
    for key, value in kafka_options(cluster).items():
        reader = reader.option(key, value)
    start = {t: {str(p): o[0] for p, o in found.items()} for t, found in parts.items()}
    end = {t: {str(p): o[1] for p, o in found.items()} for t, found in parts.items()}
    frame = (
        reader.option("assign", json.dumps({t: sorted(found) for t, found in parts.items()}))
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        # Retention may remove records between listing and reading: they are then not read.
        .option("failOnDataLoss", "false")
        .load()
    )
    origin = F.expr(f"try_element_at(filter(headers, h -> h.key = '{ORIGIN_HEADER}'), 1).value")
    return frame.select(
        "topic",
        "partition",
        "offset",
        F.expr("unix_millis(timestamp)").alias("ts"),
        # Kafka's timestamp type 1: the broker's append time, not the producer's.
        F.expr("if(timestampType = 1, unix_millis(timestamp), null)").alias("append_ts"),
        origin.cast("string").alias("origin"),
    )


_STATES = ("copied", "missing", "in_flight")


def audit_flow(
    spark: SparkSession,
    plan: FlowPlan,
    *,
    bucket_ms: int,
    since_ms: int | None = None,
    until_ms: int | None = None,
    range_limit: int = 100,
) -> list[TopicResult]:
    """Every topic of `plan` at once: one read per cluster, a handful of Spark jobs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    alias = plan.source.alias
    results = {t.topic: TopicResult(t.topic, t.remote_topic) for t in plan.topics}
    if not results:
        return []
    own_key = F.concat_ws(
        "|",
        F.lit(plan.source_cluster_id),
        F.lit(alias),
        F.col("partition").cast("string"),
        F.col("offset").cast("string"),
        F.col("topic"),
    )
    source_all = (
        _read(spark, plan.source, {t.topic: t.source for t in plan.topics})
        .withColumn("key", F.coalesce(F.col("origin"), own_key))
        .drop("origin")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    # Remote records are reported under their source topic.
    topic_of = spark.createDataFrame(
        [(t.remote_topic, t.topic) for t in plan.topics], "remote_topic string, topic string"
    )
    target_all = (
        _read(spark, plan.target, {t.remote_topic: t.remote for t in plan.topics})
        .withColumnRenamed("topic", "remote_topic")
        .join(F.broadcast(topic_of), "remote_topic")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:

        def in_window(frame: DataFrame) -> DataFrame:
            if since_ms is not None:
                frame = frame.where(F.col("ts") >= since_ms)
            if until_ms is not None:
                frame = frame.where(F.col("ts") < until_ms)
            return frame

        copies = (
            target_all.where(F.col("origin").isNotNull())
            .groupBy("origin")
            .agg(F.count(F.lit(1)).alias("n"), F.min("append_ts").alias("copy_ts"))
        )
        positions = spark.createDataFrame(
            [(t.topic, p, pos) for t in plan.topics for p, pos in sorted(t.positions.items())]
            or [("", -1, 0)],
            "topic string, partition int, position long",
        )
        n = F.coalesce(F.col("n"), F.lit(0))
        state = (
            F.when(n > 0, "copied")
            .when(F.col("position").isNull() | (F.col("offset") >= F.col("position")), "in_flight")
            .otherwise("missing")
        )
        source = (
            in_window(source_all)
            .join(copies, source_all["key"] == copies["origin"], "left")
            .join(F.broadcast(positions), ["topic", "partition"], "left")
            .select(
                "topic",
                "partition",
                "offset",
                "ts",
                n.alias("n"),
                state.alias("state"),
                (F.col("copy_ts") - F.col("ts")).alias("delay"),
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        bucket = (F.col("ts") - F.pmod(F.col("ts"), F.lit(bucket_ms))).alias("bucket")
        empty = dict.fromkeys(("source", "copies", "duplicated", "target", *_STATES), 0)
        delays = F.percentile_approx("delay", F.array(F.lit(0.5), F.lit(0.99)))
        for row in (
            source.groupBy("topic", bucket)
            .agg(
                F.count(F.lit(1)).alias("source"),
                F.sum("n").alias("copies"),
                F.sum(F.greatest(F.col("n") - 1, F.lit(0))).alias("duplicated"),
                *(F.sum(F.when(F.col("state") == s, 1).otherwise(0)).alias(s) for s in _STATES),
                delays.alias("delay"),
            )
            .collect()
        ):
            result = results[row["topic"]]
            counts = {k: int(row[k]) for k in ("source", "copies", "duplicated", *_STATES)}
            result.buckets[int(row["bucket"])] = {**empty, **counts, **_delay_keys(row["delay"])}
            for k, v in counts.items():
                setattr(result, k, getattr(result, k) + v)
        if any("delay_p50_ms" in b for r in results.values() for b in r.buckets.values()):
            for row in source.groupBy("topic").agg(delays.alias("delay")).collect():
                measured = _delay_keys(row["delay"])
                results[row["topic"]].delay_p50_ms = measured.get("delay_p50_ms")
                results[row["topic"]].delay_p99_ms = measured.get("delay_p99_ms")
        target = in_window(target_all)

        # Copies no source record explains: expired (below what the source still holds of
        # that origin) or foreign. Matched against every source record, not only the window's.
        held = source_all.select(
            _stream("key").alias("stream"), _origin_offset("key").alias("held_from")
        )
        own = spark.createDataFrame(
            [
                (f"{plan.source_cluster_id}|{alias}|{p}|{t.topic}", low)
                for t in plan.topics
                for p, (low, _) in sorted(t.source.items())
            ]
            or [("", 0)],
            "stream string, held_from long",
        )
        held = held.unionByName(own).groupBy("stream").agg(F.min("held_from").alias("held_from"))
        unmatched = (
            target.join(source_all.select("key"), target["origin"] == F.col("key"), "left_anti")
            .withColumn("stream", _stream("origin"))
            .withColumn("origin_offset", _origin_offset("origin"))
            .join(held, "stream", "left")
            .select(
                "topic",
                "partition",
                "offset",
                (
                    F.col("origin_offset").isNotNull()
                    & F.col("held_from").isNotNull()
                    & (F.col("origin_offset") < F.col("held_from"))
                ).alias("expired"),
            )
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        for row in (
            target.groupBy("topic", bucket)
            .count()
            .join(
                unmatched.groupBy("topic").agg(
                    F.sum(F.col("expired").cast("int")).alias("expired"),
                    F.sum((~F.col("expired")).cast("int")).alias("foreign"),
                ),
                "topic",
                "left",
            )
            .collect()
        ):
            result = results[row["topic"]]
            result.buckets.setdefault(int(row["bucket"]), dict(empty))["target"] = int(row["count"])
            result.expired = int(row["expired"] or 0)
            result.foreign = int(row["foreign"] or 0)

        kinds = (
            ("missing", source, F.col("state") == "missing", F.lit(1)),
            ("duplicated", source, F.col("n") > 1, F.col("n") - 1),
            ("foreign", target, F.col("chosen").isNotNull(), F.lit(1)),
        )
        for kind, frame, chosen, weight in kinds:
            if not any(getattr(r, kind) for r in results.values()):
                continue  # no Spark job for what is not there
            if kind == "foreign":
                marks = unmatched.where(~F.col("expired")).select(
                    "topic", "partition", "offset", F.lit(True).alias("chosen")
                )
                frame = frame.join(marks, ["topic", "partition", "offset"], "left")
            for topic, (ranges, truncated) in _ranges(frame, chosen, weight, range_limit).items():
                setattr(results[topic], f"{kind}_ranges", ranges)
                results[topic].ranges_truncated |= truncated
        unmatched.unpersist()
        source.unpersist()
        return [results[t.topic] for t in plan.topics]
    finally:
        source_all.unpersist()
        target_all.unpersist()


def _delay_keys(percentiles: list[int] | None) -> dict[str, int]:
    """p50 and p99 of a group's delays; none when no copy in it has an append time."""
    if not percentiles:
        return {}
    p50, p99 = percentiles
    return {"delay_p50_ms": int(p50), "delay_p99_ms": int(p99)}


def _part(column: str, index: int) -> str:
    # try_element_at: a header that is not an origin has fewer parts; ANSI mode would raise.
    return f"try_element_at(split({column}, '[|]', 5), {index})"


def _stream(column: str) -> Column:
    """The origin stream of a `ferry.origin` value: all but the offset (diff.split_key)."""
    from pyspark.sql import functions as F

    parts = ", ".join(_part(column, i) for i in (1, 2, 3, 5))
    return F.expr(f"concat_ws('|', {parts})")


def _origin_offset(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.expr(f"try_cast({_part(column, 4)} AS BIGINT)")


def _ranges(
    frame: DataFrame, chosen: Column, weight: Column, limit: int
) -> dict[str, tuple[list[dict[str, int]], bool]]:
    """Per topic, runs of chosen rows per partition (as diff.to_ranges with `held` = all of
    `frame`'s offsets: a run breaks only at a row that is not chosen), the first `limit`
    of them, and whether more were left off."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_offset = Window.partitionBy("topic", "partition").orderBy("offset")
    first_runs = Window.partitionBy("topic").orderBy("partition", "first")
    rows = (
        frame.withColumn("rank", F.row_number().over(by_offset))
        .where(chosen)
        .withColumn("weight", weight)
        .withColumn("run", F.col("rank") - F.row_number().over(by_offset))
        .groupBy("topic", "partition", "run")
        .agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.sum("weight").alias("count"),
        )
        .withColumn("index", F.row_number().over(first_runs))
        .where(F.col("index") <= limit + 1)
        .collect()
    )
    found: dict[str, dict[int, list[tuple[int, int, int]]]] = {}
    truncated: set[str] = set()
    for row in rows:
        if row["index"] > limit:
            truncated.add(row["topic"])
            continue
        found.setdefault(row["topic"], {}).setdefault(int(row["partition"]), []).append(
            (int(row["first"]), int(row["last"]), int(row["count"]))
        )
    return {
        topic: (
            [
                {"partition": p, "first": first, "last": last, "count": count}
                for p, runs in sorted(by_partition.items())
                for first, last, count in merge_ranges(runs)
            ],
            topic in truncated,
        )
        for topic, by_partition in found.items()
    }


def audit_session(config: FerryConfig) -> SparkSession:
    """A Spark session of the config's `spark.*` settings with the Kafka connector added."""
    from ferry.engine.spark.session import spark_session
    from ferry.local.spark_kafka import spark_kafka_jars

    jars = [str(p) for p in spark_kafka_jars()]
    extra = config.spark.get("spark.jars")
    settings = {
        **config.spark,
        "spark.app.name": config.spark.get("spark.app.name", "ferry-audit"),
        "spark.jars": ",".join([*([extra] if extra else []), *jars]),
    }
    return spark_session(config.model_copy(update={"spark": settings}))


def audit_flows(
    config: FerryConfig,
    chains: list[list[FlowConfig]],
    *,
    topics: str = ".*",
    bucket_ms: int = 60_000,
    since_ms: int | None = None,
    until_ms: int | None = None,
    range_limit: int = 100,
) -> dict[str, list[TopicResult]]:
    """Plan every flow (a chain of one) or chain first (all positions and ends as of now),
    then read and compare on a session of `audit_session`, stopped at the end."""
    from ferry.audit.chain import plan_chain

    plans = [plan_chain(config, chain, topics) for chain in chains]
    spark = audit_session(config)
    try:
        return {
            plan.name: audit_flow(
                spark,
                plan,
                bucket_ms=bucket_ms,
                since_ms=since_ms,
                until_ms=until_ms,
                range_limit=range_limit,
            )
            for plan in plans
        }
    finally:
        spark.stop()
