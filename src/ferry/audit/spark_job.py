"""The audit as a Spark batch job: both clusters read with Spark's Kafka connector, joined.

`plan_flow` asks the clusters (admin clients only) what to read: per topic the source and
remote partitions' offsets at the audit's start and the flow's replicated positions. Positions
are read first, so a record copied while the audit reads is never taken for lost. `audit_topic`
reads those offsets (read_committed; keys and values are not read) and applies the rules of
diff.py as DataFrame operations: the work is spread over the source and remote partitions, and
the driver collects only per-bucket counts and at most `range_limit` ranges of each kind.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

from ferry.audit.diff import merge_ranges
from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.kafka import clients
from ferry.kafka.errors import unavailable
from ferry.kafka.provenance import ORIGIN_HEADER
from ferry.ops.status import replicated_positions
from ferry.policy import policy_for
from ferry.selection import TopicSelector

__all__ = ["FlowPlan", "TopicPlan", "TopicResult", "audit_flows", "audit_topic", "plan_flow"]

Offsets = dict[int, tuple[int, int]]  # partition -> (first held offset, end offset)


@dataclass(frozen=True)
class TopicPlan:
    topic: str
    remote_topic: str
    source: Offsets
    remote: Offsets  # empty when the remote topic does not exist (yet)
    positions: dict[int, int]  # source partition -> replicated position (next offset)


@dataclass(frozen=True)
class FlowPlan:
    name: str
    source: ClusterConfig
    target: ClusterConfig
    source_cluster_id: str
    topics: list[TopicPlan]


@dataclass
class TopicResult:
    topic: str
    remote_topic: str
    source: int = 0
    copied: int = 0
    copies: int = 0
    missing: int = 0
    duplicated: int = 0
    foreign: int = 0
    expired: int = 0
    in_flight: int = 0
    # bucket start (ms) -> {"source", "copied", "missing", "in_flight", "duplicated", "target"}
    buckets: dict[int, dict[str, int]] = field(default_factory=dict)
    missing_ranges: list[dict[str, int]] = field(default_factory=list)
    duplicated_ranges: list[dict[str, int]] = field(default_factory=list)
    foreign_ranges: list[dict[str, int]] = field(default_factory=list)
    ranges_truncated: bool = False


def plan_flow(
    config: FerryConfig, flow: FlowConfig, topics: str, timeout: float = 10.0
) -> FlowPlan:
    """What to read for `flow`: its replicated topics that match `topics` (a regex)."""
    source = config.clusters[flow.source]
    target = config.clusters[flow.target]
    policy = policy_for(flow.policy, flow.source)
    selector = TopicSelector(flow, policy)
    wanted = re.compile(topics)
    source_admin = clients.admin_client(source.admin_config())
    target_admin = clients.admin_client(target.admin_config())
    try:
        source_md = source_admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise unavailable(source, exc) from None
    try:
        target_md = target_admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise unavailable(target, exc) from None
    names = sorted(
        name
        for name, md in source_md.topics.items()
        if md.error is None
        and selector.accepts(name)
        and not policy.is_heartbeats_topic(name)
        and wanted.fullmatch(name)
    )
    partitions = [(t, p) for t in names for p in source_md.topics[t].partitions]
    # Positions before ends: whatever is copied meanwhile stays below the ends read next.
    positions = replicated_positions(target, flow, partitions, timeout)
    source_offsets = _offsets(source_admin, source, partitions, timeout)
    plans = []
    for name in names:
        remote = policy.remote_topic(flow.source, name)
        remote_md = target_md.topics.get(remote)
        remote_parts = (
            [(remote, p) for p in remote_md.partitions]
            if remote_md is not None and remote_md.error is None
            else []
        )
        remote_offsets = _offsets(target_admin, target, remote_parts, timeout)
        plans.append(
            TopicPlan(
                name,
                remote,
                {p: o for (t, p), o in source_offsets.items() if t == name},
                {p: o for (_, p), o in remote_offsets.items()},
                {p: pos for (t, p), pos in positions.items() if t == name},
            )
        )
    return FlowPlan(flow.name, source, target, str(source_md.cluster_id), plans)


def _offsets(
    admin: Any, cluster: ClusterConfig, partitions: list[tuple[str, int]], timeout: float
) -> dict[tuple[str, int], tuple[int, int]]:
    """(earliest, last stable offset) of each partition."""
    if not partitions:
        return {}
    found: dict[str, dict[tuple[str, int], int]] = {}
    for kind, spec in (("low", OffsetSpec.earliest()), ("high", OffsetSpec.latest())):  # type: ignore[no-untyped-call]
        request = {TopicPartition(t, p): spec for t, p in partitions}
        futures = admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout
        )
        found[kind] = {}
        for tp, future in futures.items():
            try:
                found[kind][(tp.topic, tp.partition)] = int(future.result().offset)
            except KafkaException as exc:
                raise unavailable(cluster, exc) from None
    return {tp: (found["low"][tp], found["high"][tp]) for tp in partitions}


def kafka_options(cluster: ClusterConfig) -> dict[str, str]:
    """The Java client settings Spark's connector needs to reach `cluster` (librdkafka's
    security keys translated: protocol, SASL PLAIN/SCRAM credentials, a PEM CA file)."""
    conf = cluster.consumer_config()
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    for key in ("security.protocol", "sasl.mechanism"):
        if key in conf:
            options[f"kafka.{key}"] = conf[key]
    if "sasl.mechanisms" in conf:
        options["kafka.sasl.mechanism"] = conf["sasl.mechanisms"]
    if "sasl.username" in conf:
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if options.get("kafka.sasl.mechanism", "PLAIN").startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{conf["sasl.username"]}" '
            f'password="{conf.get("sasl.password", "")}";'
        )
    if "ssl.ca.location" in conf:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = conf["ssl.ca.location"]
    return options


def _read(spark: Any, cluster: ClusterConfig, topic: str, offsets: Offsets) -> Any:
    """partition, offset, ts (ms) and the origin header of the records in `offsets`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    parts = {p: o for p, o in sorted(offsets.items()) if o[1] > o[0]}
    if not parts:
        schema = StructType(
            [
                StructField("partition", IntegerType()),
                StructField("offset", LongType()),
                StructField("ts", LongType()),
                StructField("origin", StringType()),
            ]
        )
        return spark.createDataFrame([], schema)
    reader = spark.read.format("kafka")
    for key, value in kafka_options(cluster).items():
        reader = reader.option(key, value)
    frame = (
        reader.option("assign", json.dumps({topic: sorted(parts)}))
        .option("startingOffsets", json.dumps({topic: {str(p): o[0] for p, o in parts.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): o[1] for p, o in parts.items()}}))
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        # Retention may remove records between listing and reading: they are then not read.
        .option("failOnDataLoss", "false")
        .load()
    )
    origin = F.expr(f"try_element_at(filter(headers, h -> h.key = '{ORIGIN_HEADER}'), 1).value")
    return frame.select(
        "partition",
        "offset",
        F.expr("unix_millis(timestamp)").alias("ts"),
        origin.cast("string").alias("origin"),
    )


def audit_topic(
    spark: Any,
    plan: FlowPlan,
    topic: TopicPlan,
    *,
    bucket_ms: int,
    since_ms: int | None = None,
    until_ms: int | None = None,
    range_limit: int = 100,
) -> TopicResult:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    alias = plan.source.alias
    own_key = F.concat_ws(
        "|",
        F.lit(plan.source_cluster_id),
        F.lit(alias),
        F.col("partition").cast("string"),
        F.col("offset").cast("string"),
        F.lit(topic.topic),
    )
    source_all = (
        _read(spark, plan.source, topic.topic, topic.source)
        .withColumn("key", F.coalesce(F.col("origin"), own_key))
        .drop("origin")
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    target_all = _read(spark, plan.target, topic.remote_topic, topic.remote).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:

        def in_window(frame: Any) -> Any:
            if since_ms is not None:
                frame = frame.where(F.col("ts") >= since_ms)
            if until_ms is not None:
                frame = frame.where(F.col("ts") < until_ms)
            return frame

        copies = (
            target_all.where(F.col("origin").isNotNull())
            .groupBy("origin")
            .agg(F.count(F.lit(1)).alias("n"))
        )
        positions = spark.createDataFrame(
            [(p, pos) for p, pos in sorted(topic.positions.items())] or [(-1, 0)],
            "partition int, position long",
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
            .join(positions, "partition", "left")
            .select("partition", "offset", "ts", n.alias("n"), state.alias("state"))
        )
        bucket = (F.col("ts") - F.pmod(F.col("ts"), F.lit(bucket_ms))).alias("bucket")
        result = TopicResult(topic.topic, topic.remote_topic)
        for row in (
            source.groupBy(bucket)
            .agg(
                F.count(F.lit(1)).alias("source"),
                F.sum(F.when(F.col("state") == "copied", 1).otherwise(0)).alias("copied"),
                F.sum(F.col("n")).alias("copies"),
                F.sum(F.when(F.col("state") == "missing", 1).otherwise(0)).alias("missing"),
                F.sum(F.when(F.col("state") == "in_flight", 1).otherwise(0)).alias("in_flight"),
                F.sum(F.greatest(F.col("n") - 1, F.lit(0))).alias("duplicated"),
            )
            .collect()
        ):
            counts = {k: int(row[k]) for k in row.asDict() if k != "bucket"}
            result.buckets[int(row["bucket"])] = {**counts, "target": 0}
            for k in ("source", "copied", "copies", "missing", "in_flight", "duplicated"):
                setattr(result, k, getattr(result, k) + counts[k])
        target = in_window(target_all)
        for row in target.groupBy(bucket).count().collect():
            empty = {"source": 0, "copied": 0, "copies": 0, "missing": 0, "in_flight": 0}
            result.buckets.setdefault(int(row["bucket"]), {**empty, "duplicated": 0})
            result.buckets[int(row["bucket"])]["target"] = int(row["count"])

        # Copies no source record explains: expired (below what the source still holds of
        # that origin) or foreign. Matched against every source record, not only the window's.
        held = source_all.select(
            _stream("key").alias("stream"), _origin_offset("key").alias("held_from")
        )
        own = spark.createDataFrame(
            [
                (f"{plan.source_cluster_id}|{alias}|{p}|{topic.topic}", low)
                for p, (low, _) in sorted(topic.source.items())
            ]
            or [("", 0)],
            "stream string, held_from long",
        )
        held = held.unionByName(own).groupBy("stream").agg(F.min("held_from").alias("held_from"))
        unmatched = (
            target.join(source_all, target["origin"] == source_all["key"], "left_anti")
            .withColumn("stream", _stream("origin"))
            .withColumn("origin_offset", _origin_offset("origin"))
            .join(held, "stream", "left")
            .withColumn(
                "expired",
                F.col("origin_offset").isNotNull()
                & F.col("held_from").isNotNull()
                & (F.col("origin_offset") < F.col("held_from")),
            )
        )
        counts = unmatched.groupBy("expired").count().collect()
        for row in counts:
            if row["expired"]:
                result.expired = int(row["count"])
            else:
                result.foreign = int(row["count"])

        result.missing_ranges, t1 = _ranges(
            source, F.col("state") == "missing", F.lit(1), range_limit
        )
        result.duplicated_ranges, t2 = _ranges(source, F.col("n") > 1, F.col("n") - 1, range_limit)
        foreign_offsets = unmatched.where(~F.col("expired")).select(
            "partition", "offset", F.lit(True).alias("chosen")
        )
        marked = target.join(foreign_offsets, ["partition", "offset"], "left")
        result.foreign_ranges, t3 = _ranges(
            marked, F.col("chosen").isNotNull(), F.lit(1), range_limit
        )
        result.ranges_truncated = t1 or t2 or t3
        return result
    finally:
        source_all.unpersist()
        target_all.unpersist()


def _part(column: str, index: int) -> str:
    # try_element_at: a header that is not an origin has fewer parts; ANSI mode would raise.
    return f"try_element_at(split({column}, '[|]', 5), {index})"


def _stream(column: str) -> Any:
    """The origin stream of a `ferry.origin` value: all but the offset (diff.split_key)."""
    from pyspark.sql import functions as F

    parts = ", ".join(_part(column, i) for i in (1, 2, 3, 5))
    return F.expr(f"concat_ws('|', {parts})")


def _origin_offset(column: str) -> Any:
    from pyspark.sql import functions as F

    return F.expr(f"try_cast({_part(column, 4)} AS BIGINT)")


def _ranges(frame: Any, chosen: Any, weight: Any, limit: int) -> tuple[list[dict[str, int]], bool]:
    """Runs of chosen rows per partition, as diff.to_ranges with `held` = all of `frame`'s
    offsets: a run breaks only at a row of `frame` that is not chosen."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_offset = Window.partitionBy("partition").orderBy("offset")
    runs = (
        frame.withColumn("rank", F.row_number().over(by_offset))
        .where(chosen)
        .withColumn("weight", weight)
        .withColumn("run", F.col("rank") - F.row_number().over(by_offset))
        .groupBy("partition", "run")
        .agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.sum("weight").alias("count"),
        )
        .orderBy("partition", "first")
        .limit(limit + 1)
        .collect()
    )
    by_partition: dict[int, list[tuple[int, int, int]]] = {}
    for row in runs[:limit]:
        by_partition.setdefault(int(row["partition"]), []).append(
            (int(row["first"]), int(row["last"]), int(row["count"]))
        )
    ranges = [
        {"partition": p, "first": first, "last": last, "count": count}
        for p, found in sorted(by_partition.items())
        for first, last, count in merge_ranges(found)
    ]
    return ranges, len(runs) > limit


def audit_flows(
    config: FerryConfig,
    flows: list[FlowConfig],
    *,
    topics: str = ".*",
    bucket_ms: int = 60_000,
    since_ms: int | None = None,
    until_ms: int | None = None,
    range_limit: int = 100,
) -> dict[str, list[TopicResult]]:
    """Plan every flow first (all positions and ends as of now), then read and compare on
    a Spark session of the config's `spark.*` settings with the Kafka connector added."""
    from ferry.engine.spark.session import spark_session
    from ferry.local.spark_kafka import spark_kafka_jars

    plans = [plan_flow(config, flow, topics) for flow in flows]
    jars = [str(p) for p in spark_kafka_jars()]
    extra = config.spark.get("spark.jars")
    settings = {
        **config.spark,
        "spark.app.name": config.spark.get("spark.app.name", "ferry-audit"),
        "spark.jars": ",".join([*([extra] if extra else []), *jars]),
    }
    spark = spark_session(config.model_copy(update={"spark": settings}))
    try:
        return {
            plan.name: [
                audit_topic(
                    spark,
                    plan,
                    topic,
                    bucket_ms=bucket_ms,
                    since_ms=since_ms,
                    until_ms=until_ms,
                    range_limit=range_limit,
                )
                for topic in plan.topics
            ]
            for plan in plans
        }
    finally:
        spark.stop()
