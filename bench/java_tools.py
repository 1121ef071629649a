"""Kafka's own Java tools for the benchmark: the perf tools (the limit) and MirrorMaker 2.

The jars come from Maven Central through the same provisioning as the local brokers
(`ferry local provision`, `src/ferry/local/kafka-runtime.pom.xml`, which lists `kafka-tools`
and `connect-mirror` of the brokers' Kafka version and lets Maven resolve their runtime
dependencies: connect-runtime, connect-json, connect-mirror-client, ...). Logging is Log4j 2
through log4j-slf4j-impl, the only SLF4J binding on that classpath; every tool logs to a file.

Client settings mirror ferry's defaults (`ferry.engine.copy.client_settings`), translated to the
Java clients' names, so every copier batches, compresses and fetches alike.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ferry.engine.copy.client_settings import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS
from ferry.local.distribution import KAFKA_VERSION as KAFKA_VERSION  # re-exported
from ferry.local.distribution import ensure_kafka

# librdkafka name -> Java client name, for the settings ferry sets by default.
_JAVA_PRODUCER_NAMES = {
    "linger.ms": "linger.ms",
    "batch.size": "batch.size",
    "compression.type": "compression.type",
    "max.in.flight.requests.per.connection": "max.in.flight.requests.per.connection",
    "message.max.bytes": "max.request.size",
    "message.timeout.ms": "delivery.timeout.ms",
    "socket.send.buffer.bytes": "send.buffer.bytes",
}
_JAVA_CONSUMER_NAMES = {
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "fetch.max.bytes": "fetch.max.bytes",
    "max.partition.fetch.bytes": "max.partition.fetch.bytes",
    "socket.receive.buffer.bytes": "receive.buffer.bytes",
}
# ferry's copy loop takes up to 5000 records per consume call.
MAX_POLL_RECORDS = "5000"
# A Java producer's whole send buffer; one per MM2 task (8 tasks: 512 MiB in all, as much as
# ferry's two cached producers may queue at their defaults).
JAVA_BUFFER_MEMORY = "67108864"
# As Kafka's bin/connect-mirror-maker.sh starts MirrorMaker 2 (KAFKA_HEAP_OPTS and
# KAFKA_JVM_PERFORMANCE_OPTS of kafka-run-class.sh).
MM2_JVM_OPTIONS = (
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
TOOL_JVM_OPTIONS = ("-Xmx1G", "-XX:+UseG1GC", "-Djava.awt.headless=true")

_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
# The effective settings of every client and connector ("ProducerConfig values: ..."),
# once each: what the copier really ran with.
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = INFO
"""


def producer_settings() -> dict[str, str]:
    """ferry's default producer settings for a Java producer, with acks=all and idempotence
    (ferry forces both)."""
    settings = {java: PRODUCER_DEFAULTS[ours] for ours, java in _JAVA_PRODUCER_NAMES.items()}
    if settings["delivery.timeout.ms"] == "0":  # librdkafka's "never"; Java's is its largest
        settings["delivery.timeout.ms"] = str(2**31 - 1)
    settings.update(
        {
            "acks": "all",
            "enable.idempotence": "true",
            "buffer.memory": JAVA_BUFFER_MEMORY,
        }
    )
    return settings


def consumer_settings() -> dict[str, str]:
    """ferry's default consumer settings for a Java consumer, read_committed as ferry reads."""
    settings = {java: CONSUMER_DEFAULTS[ours] for ours, java in _JAVA_CONSUMER_NAMES.items()}
    settings.update({"isolation.level": "read_committed", "max.poll.records": MAX_POLL_RECORDS})
    return settings


def classpath() -> str:
    """The provisioned jars (fetched from Maven Central on first use), checked for the tools."""
    libs = ensure_kafka() / "libs"
    for jar in (f"kafka-tools-{KAFKA_VERSION}.jar", f"connect-mirror-{KAFKA_VERSION}.jar"):
        if not (libs / jar).exists():
            raise RuntimeError(
                f"{libs} lacks {jar}: remove {libs.parent} and run `ferry local provision`"
            )
    return str(libs / "*")


def write_log_config(directory: Path, name: str) -> Path:
    path = directory / f"{name}-log4j2.properties"
    path.write_text(_LOG4J2.format(log=directory / f"{name}.log"))
    return path


def java_command(
    main: str, args: list[str], log_config: Path, options: tuple[str, ...] = TOOL_JVM_OPTIONS
) -> list[str]:
    return [
        "java",
        *options,
        f"-Dlog4j2.configurationFile={log_config}",
        "-cp",
        classpath(),
        main,
        *args,
    ]


def write_properties(path: Path, settings: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    return path


# --- the limit --------------------------------------------------------------------------------


def write_payload_file(path: Path, value_bytes: int, count: int = 8192, seed: int = 7) -> Path:
    """`count` distinct payloads of `value_bytes` UTF-8 bytes, one a line, for
    ProducerPerformance (which reads payloads as UTF-8 text and picks one at random per
    record). Characters U+0080..U+07FF take two bytes each and vary in both, so lz4 finds
    about as little to compress as in the random values ferry and MM2 copy."""
    rng = random.Random(seed)
    chars = max(1, value_bytes // 2)
    lines = ("".join(chr(rng.randrange(0x80, 0x800)) for _ in range(chars)) for _ in range(count))
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def producer_perf_command(
    bootstrap: str, topic: str, records: int, payload_file: Path, log_config: Path
) -> list[str]:
    props = [f"{k}={v}" for k, v in {"bootstrap.servers": bootstrap, **producer_settings()}.items()]
    args = [
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--throughput",
        "-1",
        "--payload-file",
        str(payload_file),
        "--producer-props",
        *props,
    ]
    return java_command("org.apache.kafka.tools.ProducerPerformance", args, log_config)


def consumer_perf_command(
    bootstrap: str, topic: str, records: int, config: Path, log_config: Path
) -> list[str]:
    args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(records),
        "--consumer.config",
        str(config),
        "--timeout",
        "60000",
    ]
    return java_command("org.apache.kafka.tools.ConsumerPerformance", args, log_config)


@dataclass
class PerfResult:
    records: int
    records_per_second: float  # the tool's own rate (no JVM start-up)


_PRODUCER_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.MULTILINE)


def parse_producer_perf(output: str) -> PerfResult:
    """The final summary line: `N records sent, R records/sec (M MB/sec), ...`."""
    matches = _PRODUCER_SUMMARY.findall(output)
    if not matches:
        raise ValueError(f"no ProducerPerformance summary in:\n{output[-2000:]}")
    records, rate = matches[-1]
    return PerfResult(int(records), float(rate))


def parse_consumer_perf(output: str) -> PerfResult:
    """The CSV line after the header; the rate is `fetch.nMsg.sec`: records per second of
    fetching, without the group join (the tool's own best-case figure)."""
    lines = [line for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if line.startswith("start.time"):
            header = [h.strip() for h in line.split(",")]
            values = [v.strip() for v in lines[index + 1].split(",")]
            row = dict(zip(header, values, strict=False))
            return PerfResult(int(row["data.consumed.in.nMsg"]), float(row["fetch.nMsg.sec"]))
    raise ValueError(f"no ConsumerPerformance result in:\n{output[-2000:]}")


# --- MirrorMaker 2 ----------------------------------------------------------------------------


def mm2_properties(
    bootstraps: tuple[str, str], topic: str, tasks: int, run_id: str
) -> dict[str, str]:
    """A dedicated-mode MirrorMaker 2 config copying exactly `topic` from A to B.

    Tuned as ferry is: one task per partition, ferry's producer and consumer settings
    (`B.producer.*` reaches the Connect worker's producers, `A.consumer.*` the source
    consumers). MM2's own defaults otherwise (checkpoints, heartbeats, config and ACL sync),
    as ferry keeps its own. Connect's internal topics and group are new for every run, so no
    run resumes from another's stored offsets or connector configs.
    """
    bootstrap_a, bootstrap_b = bootstraps
    settings = {
        "clusters": "A, B",
        "A.bootstrap.servers": bootstrap_a,
        "B.bootstrap.servers": bootstrap_b,
        "A->B.enabled": "true",
        "A->B.topics": topic,  # one exact name (bench topics are [a-z0-9-])
        "B->A.enabled": "false",
        # Otherwise MM2 runs a B->A herder only to emit heartbeats, which ferry does not do
        # for a disabled flow.
        "B->A.emit.heartbeats.enabled": "false",
        "tasks.max": str(tasks),
        **mm2_run_storage(run_id, "B"),
    }
    settings.update({f"B.producer.{k}": v for k, v in producer_settings().items()})
    settings.update({f"A.consumer.{k}": v for k, v in consumer_settings().items()})
    return settings


def mm2_run_storage(run_id: str, target: str) -> dict[str, str]:
    """Single-node replication factors, and Connect's internal topics and group new for run
    `run_id` (on cluster `target`), so no run resumes from another's offsets or configs."""
    return {
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "offset.storage.topic": f"mm2-offsets-{run_id}.internal",
        "config.storage.topic": f"mm2-configs-{run_id}.internal",
        "status.storage.topic": f"mm2-status-{run_id}.internal",
        f"{target}.group.id": f"mm2-{run_id}",
    }


def mm2_internal_topics(run_id: str) -> list[str]:
    return [f"mm2-{kind}-{run_id}.internal" for kind in ("offsets", "configs", "status")]


def mm2_command(properties: Path, log_config: Path) -> list[str]:
    return java_command(
        "org.apache.kafka.connect.mirror.MirrorMaker",
        [str(properties)],
        log_config,
        options=MM2_JVM_OPTIONS,
    )


# --- MirrorMaker 2 with exactly-once ----------------------------------------------------------


def mm2_exactly_once_settings(rest_port: int, target: str = "B") -> dict[str, str]:
    """What engages MirrorMaker 2's exactly-once (KIP-618) in dedicated mode, added to
    `mm2_properties`.

    - `<target>.exactly.once.source.support = enabled`: a dedicated-mode worker takes its
      worker settings from the target cluster's prefix (`MirrorMakerConfig.workerConfig`); a
      top-level `exactly.once.source.support` is not among the few top-level settings it
      accepts, and alone leaves every task writing without transactions.
    - `dedicated.mode.enable.internal.rest = true` with a `listeners` URL: the internal REST
      server through which workers fence zombie tasks and forward task configs to the leader
      (KIP-710), which exactly-once source support requires.
    - the source consumers read `read_committed` (`A.consumer.isolation.level`, already in
      `consumer_settings`): MirrorSourceConnector declares exactly-once support only then.

    Each task then writes through a transactional producer (`transactional.id` =
    `<group.id>-<connector>-<task>`), one transaction per `poll()` of its consumer (the
    connector's default `transaction.boundary = poll`), with its source offsets in the same
    transaction.
    """
    return {
        f"{target}.exactly.once.source.support": "enabled",
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{rest_port}",
        "A.consumer.isolation.level": "read_committed",
    }


# --- transactions on a cluster (kafka-transactions.sh) ----------------------------------------


def transactions_list_command(bootstrap: str, log_config: Path) -> list[str]:
    """`kafka-transactions.sh --bootstrap-server X list`: every transactional id the cluster's
    coordinators know, with its producer id and state."""
    return java_command(
        "org.apache.kafka.tools.TransactionsCommand",
        ["--bootstrap-server", bootstrap, "list"],
        log_config,
    )


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


def parse_transactions_list(output: str) -> list[Transaction]:
    """The table `TransactionsCommand list` prints: a header line starting `TransactionalId`,
    then one row per id (`id coordinator producer-id state`, whitespace-separated; ids hold no
    whitespace), sorted by id."""
    lines = [line.split() for line in output.splitlines() if line.strip()]
    for index, fields in enumerate(lines):
        if fields and fields[0] == "TransactionalId":
            rows = [
                Transaction(row[0], int(row[1]), int(row[2]), row[3])
                for row in lines[index + 1 :]
                if len(row) >= 4 and row[1].isdigit() and row[2].lstrip("-").isdigit()
            ]
            return sorted(rows, key=lambda t: t.transactional_id)
    raise ValueError(f"no TransactionsCommand list table in:\n{output[-2000:]}")
