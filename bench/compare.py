"""`make bench`: ferry against MirrorMaker 2 and the brokers' own limit, on one machine, in one run.

Two local single-broker clusters A and B (`ferry local up`). Each round preloads a fresh topic
on A (N partitions, R records: keys `k<i>`, values of V random bytes, incompressible) and then
measures, each onto a fresh target topic on B:

- limit: Kafka's perf tools from Maven Central (`kafka-tools`, the brokers' version):
  ConsumerPerformance reading the preloaded topic from A and ProducerPerformance writing R
  records of V bytes into a fresh topic on B, both with ferry's client settings. No copier can
  beat the slower of the two; the rates are the tools' own (no JVM start-up).
- MM2: MirrorMaker 2 in dedicated mode (`connect-mirror`, same version), tasks.max =
  partitions, ferry's producer and consumer settings; timed from process start until the target
  holds every record (watermarks polled every 0.1 s), then stopped.
- ferry: `ferry run --once` on the same topic, timed the same way (it also exits by itself).

MM2 and ferry go in alternating order from round to round. For both: records/s and MB/s from
process start (JVM start-up included) and "copy" rates from the first record on the target to
the last; CPU seconds of the whole process tree until the target was complete (ferry: its
Python, the Spark JVM and Spark's Python workers; MM2: its JVM), MB per CPU second, peak RSS
of the tree. Medians over the rounds.

Latency (`bench.latency`): for each replicator, running continuously on a fresh topic, a
producer writes `rate` records/s for `seconds`; p50 and p99 of target append time minus source
timestamp.

Steady-rate sweep (`bench.sweep`, after the latency runs; `--no-sweep` skips it): each
replicator started once and kept running while a producer goes through several rates (1,000,
5,000, 20,000 and 50,000 records/s by default), each with a warm-up and then a timed window;
per rate and replicator p50, p99, p99.9 and max latency and the CPU share of the replicator's
process tree (CPU seconds per wall second of the window), and ferry / MM2 ratios of p99 and
CPU share. Drawn into sweep.png (`bench.plot`).

Writes bench/results/latest.json and latest.md (or `--out`, `--name`). MB = 1e6 bytes of
key + value.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import java_tools, plot, sweep
from bench.harness import (
    TopicCounter,
    cleanup_topics,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    preload,
    sample_in_background,
    time_copy,
    wait_for_count,
    warm_up,
)
from bench.latency import (
    BROKER_WARM_UP_SECONDS,
    TIMED_KEY,
    WARM_UP_KEY,
    CommittedReader,
    PacedProducer,
    read_latencies,
    warm_brokers,
)
from bench.replicators import Ferry, MirrorMaker2
from bench.stats import MB, latency_summary, median, ratio
from ferry.engine.copy.client_settings import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

RESULTS_DIR = Path(__file__).resolve().parent / "results"
Replicator = Ferry | MirrorMaker2


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--records", type=int, default=_env_int("BENCH_RECORDS", 2_000_000))
    add("--value-bytes", type=int, default=_env_int("BENCH_VALUE_BYTES", 1024))
    add("--partitions", type=int, default=_env_int("BENCH_PARTITIONS", 8))
    add(
        "--repeat",
        "--rounds",
        type=int,
        default=_env_int("BENCH_REPEAT", 5),
        help="throughput rounds",
    )
    add("--latency-rate", type=float, default=_env_float("BENCH_LATENCY_RATE", 5000))
    add("--latency-seconds", type=float, default=_env_float("BENCH_LATENCY_SECONDS", 60))
    add(
        "--latency-warmup",
        type=float,
        default=_env_float("BENCH_LATENCY_WARMUP", 15),
        help="seconds of the same traffic before the timed part (not timed)",
    )
    add(
        "--latency-broker-warmup",
        type=float,
        default=_env_float("BENCH_LATENCY_BROKER_WARMUP", BROKER_WARM_UP_SECONDS),
        help="seconds of the latency rate through both brokers, with no replicator, before "
        "the first latency round: the brokers' JIT warms up for neither replicator (0: none)",
    )
    add(
        "--latency-repeat",
        type=int,
        default=_env_int("BENCH_LATENCY_REPEAT", 1),
        help="latency rounds per replicator (0: none)",
    )
    add(
        "--sweep-rates",
        default=os.environ.get(
            "BENCH_SWEEP_RATES", ",".join(f"{r:.0f}" for r in sweep.DEFAULT_RATES)
        ),
        help="steady-rate sweep: records/s, comma-separated",
    )
    add(
        "--sweep-seconds",
        type=float,
        default=_env_float("BENCH_SWEEP_SECONDS", 30),
        help="steady-rate sweep: timed seconds per rate",
    )
    add(
        "--sweep-warmup",
        type=float,
        default=_env_float("BENCH_SWEEP_WARMUP", 10),
        help="steady-rate sweep: seconds at each rate before its timed part (not timed)",
    )
    add(
        "--sweep-settle",
        type=float,
        default=_env_float("BENCH_SWEEP_SETTLE", 30),
        help="steady-rate sweep: seconds at the lowest rate after each replicator started, "
        "before the first rate (not timed)",
    )
    add(
        "--no-sweep",
        action="store_true",
        default=os.environ.get("BENCH_SWEEP", "1") == "0",
        help="skip the steady-rate sweep (or BENCH_SWEEP=0)",
    )
    add(
        "--only",
        default=os.environ.get("BENCH_ONLY", "limit,mm2,ferry"),
        help="what the throughput rounds measure, comma-separated (limit, mm2, ferry)",
    )
    add("--bootstrap-a", help="use this source cluster instead of a local one")
    add("--bootstrap-b", help="use this target cluster instead of a local one")
    add("--timeout", type=float, default=1800.0, help="per measurement, seconds")
    add("--out", type=Path, default=Path(os.environ.get("BENCH_OUT", RESULTS_DIR)))
    add("--name", default=os.environ.get("BENCH_NAME", "latest"), help="results file name")
    add("--keep-temp", action="store_true", help="keep configs and logs of every run")
    add(
        "--render",
        type=Path,
        metavar="JSON",
        help="only write the markdown table of an existing results file next to it",
    )
    add(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra ferry config line, e.g. ferry.bins=4 (repeatable)",
    )
    args = parser.parse_args()
    if (args.bootstrap_a is None) != (args.bootstrap_b is None):
        parser.error("give both --bootstrap-a and --bootstrap-b, or neither")
    if any("=" not in setting for setting in args.set):
        parser.error("--set takes KEY=VALUE")
    try:
        args.sweep_rates = sweep.parse_rates(args.sweep_rates)
    except ValueError as exc:
        parser.error(f"--sweep-rates: {exc}")
    args.only = {part.strip() for part in args.only.split(",") if part.strip()}
    if not args.only <= {"limit", "mm2", "ferry"}:
        parser.error("--only takes limit, mm2 and ferry")
    return args


def note(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --- results ----------------------------------------------------------------------------------


@dataclass
class CopyRun:
    replicator: str
    round: int
    records: int
    bytes: int
    target_records: int
    seconds: float
    first_seconds: float
    copy_seconds: float
    records_per_second: float
    mb_per_second: float
    copy_mb_per_second: float
    cpu_seconds: float
    mb_per_cpu_second: float
    peak_rss_mb: float
    processes: int
    load_before: float
    exit_seconds: float | None = None  # ferry --once: when the process itself ended
    exit_cpu_seconds: float | None = None  # ferry --once: CPU of the whole process
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class LimitRun:
    round: int
    producer_records_per_second: float
    consumer_records_per_second: float
    producer_mb_per_second: float
    consumer_mb_per_second: float
    records_per_second: float
    mb_per_second: float
    load_before: float


@dataclass
class LatencyRun:
    replicator: str
    round: int
    rate: float
    seconds: float
    records: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    ready_seconds: float  # replicator start until the warm-up records were on the target
    cpu_seconds: float  # of the replicator's tree while the timed records were produced
    cpu_share: float  # cpu_seconds per second of the timed phase (1.0 = one core)
    peak_rss_mb: float
    load_before: float
    # At a read_committed consumer of the target (bench.latency.CommittedReader): its receive
    # time minus the source timestamp; what an exactly-once consumer sees.
    consumer_p50_ms: float | None = None
    consumer_p99_ms: float | None = None
    consumer_p999_ms: float | None = None


# --- one throughput round ---------------------------------------------------------------------


@dataclass
class Round:
    index: int
    topic: str
    records: int
    bytes: int
    work: Path


def measure_limit(rnd: Round, bootstraps: tuple[str, str], args: argparse.Namespace) -> LimitRun:
    bootstrap_a, bootstrap_b = bootstraps
    run_dir = rnd.work / "limit"
    run_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    record_bytes = rnd.bytes / rnd.records
    consumer_config = java_tools.write_properties(
        run_dir / "consumer.properties",
        {**java_tools.consumer_settings(), "group.id": f"bench-limit-{uuid.uuid4().hex}"},
    )
    output = run_tool(
        java_tools.consumer_perf_command(
            bootstrap_a,
            rnd.topic,
            rnd.records,
            consumer_config,
            java_tools.write_log_config(run_dir, "consumer-perf"),
        ),
        run_dir / "consumer-perf",
        args.timeout,
    )
    consumed = java_tools.parse_consumer_perf(output)
    if consumed.records < rnd.records:
        raise RuntimeError(f"ConsumerPerformance read {consumed.records} of {rnd.records}")
    target = f"limit-{uuid.uuid4()}"
    create_topic(bootstrap_b, target, args.partitions)
    try:
        payload = java_tools.write_payload_file(run_dir / "payloads.txt", args.value_bytes)
        output = run_tool(
            java_tools.producer_perf_command(
                bootstrap_b,
                target,
                rnd.records,
                payload,
                java_tools.write_log_config(run_dir, "producer-perf"),
            ),
            run_dir / "producer-perf",
            args.timeout,
        )
        produced = java_tools.parse_producer_perf(output)
    finally:
        cleanup_topics(bootstrap_b, [target])
    producer_mb = produced.records_per_second * record_bytes / MB
    consumer_mb = consumed.records_per_second * record_bytes / MB
    return LimitRun(
        round=rnd.index,
        producer_records_per_second=round(produced.records_per_second, 1),
        consumer_records_per_second=round(consumed.records_per_second, 1),
        producer_mb_per_second=round(producer_mb, 2),
        consumer_mb_per_second=round(consumer_mb, 2),
        records_per_second=round(min(produced.records_per_second, consumed.records_per_second), 1),
        mb_per_second=round(min(producer_mb, consumer_mb), 2),
        load_before=round(load_before, 2),
    )


def run_tool(command: list[str], log: Path, timeout: float) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    log.with_suffix(".out").write_text(result.stdout)
    log.with_suffix(".err").write_text(result.stderr)
    if result.returncode != 0:
        raise RuntimeError(
            f"{command[-1]} ... exited {result.returncode}:\n{result.stderr[-3000:]}"
        )
    return result.stdout


def measure_copy(
    rnd: Round,
    replicator: Replicator,
    counter: TopicCounter,
    args: argparse.Namespace,
) -> CopyRun:
    run_dir = rnd.work / replicator.name
    target = replicator.target(rnd.topic)
    proc = replicator.start(run_dir, rnd.topic, once=True)
    try:
        timing = time_copy(
            proc, counter, target, rnd.records, args.timeout, exits=replicator.name == "ferry"
        )
        details: dict[str, Any] = {}
        exit_seconds = exit_cpu = None
        if isinstance(replicator, Ferry):
            code = proc.wait(args.timeout)
            if code != 0:
                raise RuntimeError(f"ferry run exited {code}:\n{proc.stderr_tail()}")
            assert proc.ended is not None
            exit_seconds = round(proc.ended - proc.began, 3)
            exit_cpu = round(proc.cpu_seconds, 2)
            details = ferry_details(run_dir)
        else:
            proc.stop()
        held = counter.count(target)
    except BaseException:
        proc.kill()
        raise
    finally:
        replicator.cleanup(rnd.topic)
    megabytes = rnd.bytes / MB
    return CopyRun(
        replicator=replicator.name,
        round=rnd.index,
        records=rnd.records,
        bytes=rnd.bytes,
        target_records=held,
        seconds=round(timing.seconds, 3),
        first_seconds=round(timing.first_seconds, 3),
        copy_seconds=round(timing.copy_seconds, 3),
        records_per_second=round(rnd.records / timing.seconds, 1),
        mb_per_second=round(megabytes / timing.seconds, 2),
        copy_mb_per_second=round(megabytes / timing.copy_seconds, 2),
        cpu_seconds=round(timing.cpu_seconds, 2),
        mb_per_cpu_second=round(megabytes / timing.cpu_seconds, 3),
        peak_rss_mb=round(timing.peak_rss_bytes / MB, 1),
        processes=timing.processes,
        load_before=round(timing.load_before, 2),
        exit_seconds=exit_seconds,
        exit_cpu_seconds=exit_cpu,
        details=details,
    )


def ferry_details(run_dir: Path) -> dict[str, Any]:
    """ferry's own summary (`--json`) and, from its state, batches and time in copy tasks."""
    details: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError, KeyError):
        details["summary"] = json.loads((run_dir / "ferry.out").read_text())["A->B"]
    try:
        stats = json.loads((run_dir / "state" / "A-to-B" / "stats.json").read_text())
        details["batches"] = stats.get("batches")
        details["task_seconds"] = round(stats.get("busy_seconds", 0.0), 3)
    except (OSError, ValueError):
        pass
    return details


def one_round(
    index: int,
    bootstraps: tuple[str, str],
    values: list[bytes],
    args: argparse.Namespace,
    work: Path,
    counter: TopicCounter,
) -> tuple[LimitRun | None, list[CopyRun]]:
    bootstrap_a, _bootstrap_b = bootstraps
    topic = f"bench-{uuid.uuid4()}"
    create_topic(bootstrap_a, topic, args.partitions)
    try:
        note(f"round {index}: preloading {args.records:,} records into {topic}")
        payload = preload(bootstrap_a, topic, args.partitions, args.records, values)
        rnd = Round(index, topic, args.records, payload, work / f"round-{index}")
        limit = None
        if "limit" in args.only:
            note(f"round {index}: limit (ConsumerPerformance, ProducerPerformance)")
            limit = measure_limit(rnd, bootstraps, args)
            note(
                f"round {index}: limit {limit.mb_per_second:.1f} MB/s (consumer "
                f"{limit.consumer_mb_per_second:.1f}, producer {limit.producer_mb_per_second:.1f})"
            )
        replicators: list[Replicator] = []
        if "mm2" in args.only:
            replicators.append(MirrorMaker2(bootstraps, tasks=args.partitions))
        if "ferry" in args.only:
            replicators.append(Ferry(bootstraps, args.set))
        if index % 2 == 0:
            replicators.reverse()  # alternate who goes first
        runs = []
        for replicator in replicators:
            note(f"round {index}: {replicator.name} copying")
            run = measure_copy(rnd, replicator, counter, args)
            note(
                f"round {index}: {replicator.name} {run.mb_per_second:.1f} MB/s from start "
                f"({run.seconds:.1f} s), copy {run.copy_mb_per_second:.1f} MB/s, "
                f"{run.cpu_seconds:.1f} CPU s, {run.mb_per_cpu_second:.2f} MB/CPU s"
            )
            runs.append(run)
        return limit, runs
    finally:
        cleanup_topics(bootstrap_a, [topic])


def first_runs(
    bootstraps: tuple[str, str],
    values: list[bytes],
    args: argparse.Namespace,
    work: Path,
    counter: TopicCounter,
) -> None:
    """One untimed copy of a small topic by each replicator, so the timed runs are what a
    machine that has run it before sees: jars in the page cache, and ferry's driver JVM class
    archive written (ferry writes it at the end of its first run on a machine)."""
    topic = f"bench-first-{uuid.uuid4()}"
    records = 1000 * args.partitions
    create_topic(bootstraps[0], topic, args.partitions)
    try:
        payload = preload(bootstraps[0], topic, args.partitions, records, values)
        rnd = Round(0, topic, records, payload, work / "first-runs")
        for replicator in (
            MirrorMaker2(bootstraps, tasks=args.partitions),
            Ferry(bootstraps, args.set),
        ):
            if replicator.name in args.only:
                note(f"first run (untimed): {replicator.name}")
                measure_copy(rnd, replicator, counter, args)
    finally:
        cleanup_topics(bootstraps[0], [topic])


# --- latency ----------------------------------------------------------------------------------


def measure_latency(
    index: int,
    replicator: Replicator,
    bootstraps: tuple[str, str],
    values: list[bytes],
    args: argparse.Namespace,
    work: Path,
    counter: TopicCounter,
) -> LatencyRun:
    bootstrap_a, bootstrap_b = bootstraps
    topic = f"lat-{uuid.uuid4()}"
    target = replicator.target(topic)
    create_topic(bootstrap_a, topic, args.partitions)
    # The copies get the target broker's append time as their timestamp (see bench.latency).
    create_topic(bootstrap_b, target, args.partitions, {"message.timestamp.type": "LogAppendTime"})
    run_dir = work / f"latency-{replicator.name}-{index}"
    reader = CommittedReader(bootstrap_b, target).start()
    producer = PacedProducer(bootstrap_a, topic, args.partitions, values)
    proc = replicator.start(run_dir, topic, once=False)
    try:
        warm = 10 * args.partitions
        producer.burst(WARM_UP_KEY, warm)
        # The replicator is up and copying, in its steady state (ferry: Spark's tasks).
        while counter.count(target) < warm or not replicator.steady(run_dir):
            proc.sample()
            if proc.poll() is not None:
                raise RuntimeError(f"{replicator.name} exited:\n{proc.stderr_tail()}")
            if time.monotonic() - proc.began > 600:
                raise TimeoutError(f"{replicator.name} copied nothing in 600 s")
            time.sleep(0.1)
        ready = time.monotonic() - proc.began
        note(
            f"latency {index}: {replicator.name} ready after {ready:.1f} s; "
            f"{args.latency_rate:,.0f} records/s for {args.latency_warmup:.0f} s (warm-up) "
            f"+ {args.latency_seconds:.0f} s (timed)"
        )
        # The first batches or polls after start-up are slow (JIT, workers starting): the same
        # traffic for a while first, not timed, for both replicators alike.
        sampler_stop = sample_in_background(proc)
        try:
            warm += producer.paced(WARM_UP_KEY, args.latency_rate, args.latency_warmup)
        finally:
            sampler_stop()
        proc.sample(force=True)
        cpu_before = proc.cpu_seconds
        began = time.monotonic()
        sampler_stop = sample_in_background(proc)
        try:
            timed = producer.paced(TIMED_KEY, args.latency_rate, args.latency_seconds)
        finally:
            sampler_stop()
        proc.sample(force=True)
        timed_seconds = time.monotonic() - began
        cpu = proc.cpu_seconds - cpu_before
        wait_for_count(counter, target, warm + timed, 300, replicator.name)
        reader.wait_for(timed, 300)
        proc.stop(grace=60)
        consumer = latency_summary(reader.stop())
        latencies = read_latencies(bootstrap_b, target, timed)
    except BaseException:
        proc.kill()
        raise
    finally:
        reader.close()
        replicator.cleanup(topic)  # the target topic and the replicator's own
        cleanup_topics(bootstrap_a, [topic])
    summary = latency_summary(latencies)
    return LatencyRun(
        replicator=replicator.name,
        round=index,
        rate=args.latency_rate,
        seconds=round(timed_seconds, 2),
        records=int(summary["count"]),
        p50_ms=summary["p50_ms"],
        p90_ms=summary["p90_ms"],
        p99_ms=summary["p99_ms"],
        p999_ms=summary["p999_ms"],
        max_ms=summary["max_ms"],
        ready_seconds=round(ready, 2),
        cpu_seconds=round(cpu, 2),
        cpu_share=round(cpu / timed_seconds, 3),
        peak_rss_mb=round(proc.sampler.peak_rss_bytes / MB, 1),
        load_before=round(proc.load_before, 2),
        consumer_p50_ms=consumer["p50_ms"],
        consumer_p99_ms=consumer["p99_ms"],
        consumer_p999_ms=consumer["p999_ms"],
    )


# --- report -----------------------------------------------------------------------------------


COPY_FIELDS = (
    "seconds",
    "first_seconds",
    "copy_seconds",
    "records_per_second",
    "mb_per_second",
    "copy_mb_per_second",
    "cpu_seconds",
    "mb_per_cpu_second",
    "peak_rss_mb",
    "exit_seconds",
    "exit_cpu_seconds",
)
LIMIT_FIELDS = (
    "records_per_second",
    "mb_per_second",
    "producer_records_per_second",
    "consumer_records_per_second",
    "producer_mb_per_second",
    "consumer_mb_per_second",
)
LATENCY_FIELDS = ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms", "cpu_share", "ready_seconds")


def medians(runs: list[Any], fields: tuple[str, ...]) -> dict[str, float | None]:
    return {name: median(getattr(r, name) for r in runs) for name in fields}


def machine_info(local: bool) -> dict[str, Any]:
    import confluent_kafka
    import pyspark

    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "java": _java_version(),
        "kafka": java_tools.KAFKA_VERSION if local else "external clusters (version not checked)",
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }


def _java_version() -> str:
    result = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return (result.stderr.splitlines() or ["?"])[0]


def report(
    args: argparse.Namespace,
    limits: list[LimitRun],
    copies: list[CopyRun],
    latencies: list[LatencyRun],
    local: bool,
    swept: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ferry = medians([c for c in copies if c.replicator == "ferry"], COPY_FIELDS)
    mm2 = medians([c for c in copies if c.replicator == "mm2"], COPY_FIELDS)
    limit = medians(limits, LIMIT_FIELDS)
    ferry_lat = medians([x for x in latencies if x.replicator == "ferry"], LATENCY_FIELDS)
    mm2_lat = medians([x for x in latencies if x.replicator == "mm2"], LATENCY_FIELDS)
    result: dict[str, Any] = {
        "benchmark": "ferry vs MirrorMaker 2 vs limit",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kafka_version": java_tools.KAFKA_VERSION,
        "records": args.records,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "runs": args.repeat,
        "latency_runs": args.latency_repeat,
        "latency_rate": args.latency_rate,
        "latency_seconds": args.latency_seconds,
        "latency_warmup_seconds": args.latency_warmup,
        "latency_broker_warmup_seconds": args.latency_broker_warmup,
        "ferry_settings": args.set,
        # Which copy loop ferry's runs used (native: C over librdkafka; python), and the
        # client settings both copiers ran with (MM2 gets ferry's, see java_tools).
        "ferry_copier": ",".join(
            sorted(
                {
                    str(c.details.get("summary", {}).get("copier") or "?")
                    for c in copies
                    if c.replicator == "ferry"
                }
            )
        ),
        "producer_settings": dict(PRODUCER_DEFAULTS),
        "consumer_settings": dict(CONSUMER_DEFAULTS),
        # Headline figures: medians over the runs.
        "limit_mb_s": limit["mb_per_second"],
        "limit_records_s": limit["records_per_second"],
        "limit_producer_mb_s": limit["producer_mb_per_second"],
        "limit_consumer_mb_s": limit["consumer_mb_per_second"],
        "ferry_mb_s": ferry["mb_per_second"],
        "mm2_mb_s": mm2["mb_per_second"],
        "ferry_records_s": ferry["records_per_second"],
        "mm2_records_s": mm2["records_per_second"],
        "ferry_copy_mb_s": ferry["copy_mb_per_second"],
        "mm2_copy_mb_s": mm2["copy_mb_per_second"],
        "ferry_seconds": ferry["seconds"],
        "mm2_seconds": mm2["seconds"],
        "ferry_first_record_seconds": ferry["first_seconds"],
        "mm2_first_record_seconds": mm2["first_seconds"],
        "ferry_cpu_s": ferry["cpu_seconds"],
        "mm2_cpu_s": mm2["cpu_seconds"],
        "ferry_mb_per_cpu_s": ferry["mb_per_cpu_second"],
        "mm2_mb_per_cpu_s": mm2["mb_per_cpu_second"],
        "ferry_peak_rss_mb": ferry["peak_rss_mb"],
        "mm2_peak_rss_mb": mm2["peak_rss_mb"],
        "ferry_p50_ms": ferry_lat["p50_ms"],
        "ferry_p99_ms": ferry_lat["p99_ms"],
        "mm2_p50_ms": mm2_lat["p50_ms"],
        "mm2_p99_ms": mm2_lat["p99_ms"],
        "ferry_latency_cpu_share": ferry_lat["cpu_share"],
        "mm2_latency_cpu_share": mm2_lat["cpu_share"],
    }
    result["targets"] = targets(result)
    result.update(
        {
            "limit_runs": [asdict(r) for r in limits],
            "copy_runs": [asdict(r) for r in copies],
            "latency_runs_detail": [asdict(r) for r in latencies],
            "machine": machine_info(local),
            "method": METHOD,
            "sweep": swept,
        }
    )
    return result


METHOD = {
    "mb": "1e6 bytes of key + value",
    "throughput": (
        "from process start (JVM and Spark start-up included) until the target topic's "
        "watermarks (polled every 0.1 s) sum to the preloaded record count"
    ),
    "copy_rate": "from the first record on the target to the last (no start-up)",
    "cpu": (
        "utime + stime of the replicator's whole process tree from /proc, sampled every "
        "0.25 s, until the target was complete (ferry: its Python, the Spark JVM and Spark's "
        "Python workers; MM2: its JVM); the brokers are not included"
    ),
    "peak_rss": "largest sum of RSS over the process tree at one sample",
    "limit": (
        "slower of ConsumerPerformance (fetch.nMsg.sec, reading the preloaded topic from A) "
        "and ProducerPerformance (records/sec into a fresh topic on B), with ferry's client "
        "settings; records/s times the preloaded bytes per record"
    ),
    "latency": (
        "target topic created with message.timestamp.type=LogAppendTime for both replicators; "
        "latency = the copy's timestamp (target append time) minus the source timestamp, "
        "which the producer also writes into each value; warm-up records excluded"
    ),
    "sweep": (
        "each replicator started once and kept running on one source topic; after start-up "
        "some seconds at the lowest rate (excluded); per rate "
        "(ascending): warm-up at the rate (excluded), timed window at the rate, then until the "
        "target caught up; latencies of the timed records read back from the target's end "
        "offsets before the rate began; CPU share = CPU seconds of the replicator's process "
        "tree in the timed window / the window's wall seconds (see bench/sweep.py)"
    ),
}


def targets(r: dict[str, Any]) -> dict[str, Any]:
    throughput_vs_mm2 = ratio(r["ferry_mb_s"], r["mm2_mb_s"])
    throughput_vs_limit = ratio(r["ferry_mb_s"], r["limit_mb_s"])
    copy_vs_limit = ratio(r["ferry_copy_mb_s"], r["limit_mb_s"])
    efficiency = ratio(r["ferry_mb_per_cpu_s"], r["mm2_mb_per_cpu_s"])

    def holds(value: float | None, bound: float, *, at_most: bool = False) -> bool | None:
        if value is None:
            return None
        return value <= bound if at_most else value >= bound

    return {
        "ferry_vs_mm2_throughput": _round(throughput_vs_mm2),
        "ferry_vs_limit_throughput": _round(throughput_vs_limit),
        "ferry_copy_vs_limit_throughput": _round(copy_vs_limit),
        "ferry_vs_mm2_mb_per_cpu_s": _round(efficiency),
        "throughput_at_least_1_5x_mm2": holds(throughput_vs_mm2, 1.5),
        "throughput_at_least_70pct_of_limit": holds(throughput_vs_limit, 0.7),
        "mb_per_cpu_s_at_least_3x_mm2": holds(efficiency, 3.0),
        "p99_at_most_1000_ms": holds(r["ferry_p99_ms"], 1000.0, at_most=True),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _fmt(value: float | None, pattern: str = "{:,.1f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def _extra_settings(settings: list[str] | None) -> str:
    """The `--set` lines ferry ran with on top of the defaults (MM2 did not get them)."""
    if not settings:
        return ""
    return "ferry alone also with " + ", ".join(f"`{line}`" for line in settings) + ". "


def _settings(settings: dict[str, str] | None) -> str:
    if not settings:
        return "n/a"
    return ", ".join(f"`{k}={v}`" for k, v in settings.items())


def markdown(r: dict[str, Any]) -> str:
    machine = r["machine"]
    t = r["targets"]
    lines = [
        f"# ferry vs MirrorMaker 2 vs the brokers' limit: {r['records']:,} records x "
        f"{r['value_bytes']} B, {r['partitions']} partitions",
        "",
        f"{r['date']}; {machine['cpu_count']} CPUs; Kafka {r['kafka_version']} (brokers, "
        f"perf tools and MM2); pyspark {machine['pyspark']}; librdkafka {machine['librdkafka']}; "
        f"{machine['java']}. Two single-broker clusters and the copier on one machine. "
        f"ferry's copy loop: {r.get('ferry_copier') or 'not reported (no throughput round)'}. "
        f"Both copiers with ferry's client defaults: producer "
        f"{_settings(r.get('producer_settings'))}; consumer "
        f"{_settings(r.get('consumer_settings'))}. "
        f"{_extra_settings(r.get('ferry_settings'))}"
        f"Throughput: medians of {r['runs']} runs (MM2 and ferry alternate who goes first), "
        "after one untimed first run of each on a small topic (as on a machine that ran them "
        "before: jars cached, ferry's JVM class archive written); "
        f"latency: {r['latency_runs']} run per replicator (BENCH_LATENCY_REPEAT for more) at "
        f"{r['latency_rate']:,.0f} records/s, {r.get('latency_warmup_seconds', 0):.0f} s "
        f"of warm-up then {r['latency_seconds']:.0f} s timed"
        + (
            f", after {r['latency_broker_warmup_seconds']:.0f} s of the same rate through both "
            "brokers with no replicator (their JIT warmed for neither)."
            if r.get("latency_broker_warmup_seconds")
            else "."
        ),
        "",
        "| | MB/s | records/s | copy MB/s | CPU s | MB per CPU s | peak RSS MB | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        "| limit (perf tools) | "
        + " | ".join(
            [
                _fmt(r["limit_mb_s"]),
                _fmt(r["limit_records_s"], "{:,.0f}"),
                "",
                "",
                "",
                "",
                "",
                "",
            ]
        )
        + " |",
    ]
    for name, label in (("mm2", "MirrorMaker 2"), ("ferry", "ferry")):
        lines.append(
            f"| {label} | "
            + " | ".join(
                [
                    _fmt(r[f"{name}_mb_s"]),
                    _fmt(r[f"{name}_records_s"], "{:,.0f}"),
                    _fmt(r[f"{name}_copy_mb_s"]),
                    _fmt(r[f"{name}_cpu_s"]),
                    _fmt(r[f"{name}_mb_per_cpu_s"], "{:,.2f}"),
                    _fmt(r[f"{name}_peak_rss_mb"], "{:,.0f}"),
                    _fmt(r[f"{name}_p50_ms"], "{:,.0f}"),
                    _fmt(r[f"{name}_p99_ms"], "{:,.0f}"),
                ]
            )
            + " |"
        )
    lines += [
        "",
        "MB/s and records/s: from process start (JVM/Spark start-up included) until the target "
        "held every record; copy MB/s: first record on the target to the last. CPU s: the "
        "copier's whole process tree until the target was complete. Limit: the slower of "
        f"ConsumerPerformance ({_fmt(r['limit_consumer_mb_s'])} MB/s) and ProducerPerformance "
        f"({_fmt(r['limit_producer_mb_s'])} MB/s), their own rates without JVM start-up. "
        "Latency: target append time (LogAppendTime target topic) minus source timestamp. "
        "MB = 1e6 bytes of key + value.",
        "",
        "| target | measured | holds |",
        "|---|---:|---|",
        f"| ferry throughput >= 1.5 x MM2 | {_fmt(t['ferry_vs_mm2_throughput'], '{:.2f}')} x "
        f"| {_yes(t['throughput_at_least_1_5x_mm2'])} |",
        f"| ferry throughput >= 70% of limit | {_pct(t['ferry_vs_limit_throughput'])} "
        f"(copy rate: {_pct(t['ferry_copy_vs_limit_throughput'])}) "
        f"| {_yes(t['throughput_at_least_70pct_of_limit'])} |",
        f"| ferry MB per CPU s >= 3 x MM2 | {_fmt(t['ferry_vs_mm2_mb_per_cpu_s'], '{:.2f}')} x "
        f"| {_yes(t['mb_per_cpu_s_at_least_3x_mm2'])} |",
        f"| ferry p99 <= 1 s at {r['latency_rate']:,.0f} records/s "
        f"| {_fmt(r['ferry_p99_ms'], '{:,.0f}')} ms | {_yes(t['p99_at_most_1000_ms'])} |",
        "",
        "Per run:",
        "",
        "| run | copier | s | first record s | MB/s | copy MB/s | CPU s | MB per CPU s "
        "| peak RSS MB | target records | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for limit in r["limit_runs"]:
        lines.append(
            f"| {limit['round']} | limit | | | {limit['mb_per_second']:.1f} "
            f"(consumer {limit['consumer_mb_per_second']:.1f}, producer "
            f"{limit['producer_mb_per_second']:.1f}) | | | | | | {limit['load_before']:.1f} |"
        )
    for run in r["copy_runs"]:
        lines.append(
            f"| {run['round']} | {run['replicator']} | {run['seconds']:.1f} "
            f"| {run['first_seconds']:.1f} | {run['mb_per_second']:.1f} "
            f"| {run['copy_mb_per_second']:.1f} | {run['cpu_seconds']:.1f} "
            f"| {run['mb_per_cpu_second']:.2f} | {run['peak_rss_mb']:,.0f} "
            f"| {run['target_records']:,} | {run['load_before']:.1f} |"
        )
    if r["latency_runs_detail"]:
        lines += [
            "",
            "| latency run | copier | records | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms "
            "| consumer p50 / p99 / p99.9 ms | CPU share | ready s | load |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for x in r["latency_runs_detail"]:
            lines.append(
                f"| {x['round']} | {x['replicator']} | {x['records']:,} | {x['p50_ms']:,.0f} "
                f"| {x['p90_ms']:,.0f} | {x['p99_ms']:,.0f} | {x['p999_ms']:,.0f} "
                f"| {x['max_ms']:,.0f} | {_consumer(x)} | {x['cpu_share']:.2f} "
                f"| {x['ready_seconds']:.1f} "
                f"| {x['load_before']:.1f} |"
            )
        lines += [
            "",
            "CPU share: the copier's CPU seconds per second while the timed records were "
            "produced (1.00 = one core busy). ready s: from start until warm-up records arrived. "
            "p50 to max: target append time minus source timestamp; consumer: a read_committed "
            "consumer's receive time minus source timestamp (without transactions it reads "
            "what read_uncommitted does).",
        ]
    lines.append(
        "\nload: the machine's 1-minute load average as the run started (brokers, the "
        "benchmark itself and anything else running count too)."
    )
    if r.get("sweep"):
        lines += sweep.markdown_lines(r["sweep"])
    return "\n".join(lines) + "\n"


def _consumer(run: dict[str, Any]) -> str:
    """A latency run's read_committed consumer figures (results before them have none)."""
    figures = [run.get(f"consumer_{p}_ms") for p in ("p50", "p99", "p999")]
    if any(f is None for f in figures):
        return "n/a"
    return " / ".join(f"{f:,.0f}" for f in figures)


def _yes(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "**no**")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.0f}%"


def write_results(out: Path, name: str, result: dict[str, Any]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (out / f"{name}.md").write_text(table)
    write_chart(out, name, result)
    return table


def write_chart(out: Path, name: str, result: dict[str, Any]) -> None:
    """The sweep's chart (sweep.png for latest.json), if the results have a sweep."""
    swept = result.get("sweep")
    if swept and swept["runs"]:
        note(f"sweep chart: {plot.sweep_chart(swept, plot.chart_path(out, name))}")


# --- main -------------------------------------------------------------------------------------


def run_all(
    args: argparse.Namespace, bootstraps: tuple[str, str], work: Path
) -> tuple[list[LimitRun], list[CopyRun], list[LatencyRun], dict[str, Any] | None]:
    values = make_values(args.value_bytes)
    java_tools.classpath()  # fetches the jars first if this machine has none yet
    counter = TopicCounter(bootstraps[1])
    limits: list[LimitRun] = []
    copies: list[CopyRun] = []
    latencies: list[LatencyRun] = []
    swept = None
    try:
        first_runs(bootstraps, values, args, work, counter)
        for index in range(1, args.repeat + 1):
            limit, runs = one_round(index, bootstraps, values, args, work, counter)
            if limit is not None:
                limits.append(limit)
            copies.extend(runs)
        if args.latency_repeat > 0 and args.latency_broker_warmup > 0:
            note(
                f"brokers warming up: {args.latency_rate:,.0f} records/s for "
                f"{args.latency_broker_warmup:.0f} s, no replicator"
            )
            warm_brokers(
                bootstraps, args.latency_rate, args.latency_broker_warmup, args.partitions, values
            )
        for index in range(1, args.latency_repeat + 1):
            replicators: list[Replicator] = [
                MirrorMaker2(bootstraps, tasks=args.partitions),
                Ferry(bootstraps, args.set),
            ]
            if index % 2 == 1:
                replicators.reverse()  # ferry first in odd rounds
            for replicator in replicators:
                run = measure_latency(index, replicator, bootstraps, values, args, work, counter)
                note(
                    f"latency {index}: {replicator.name} p50 {run.p50_ms:.0f} ms, "
                    f"p99 {run.p99_ms:.0f} ms ({run.records:,} records)"
                )
                latencies.append(run)
        if not args.no_sweep:
            swept = run_sweep(args, bootstraps, values, work, counter)
    finally:
        counter.close()
    return limits, copies, latencies, swept


def run_sweep(
    args: argparse.Namespace,
    bootstraps: tuple[str, str],
    values: list[bytes],
    work: Path,
    counter: TopicCounter,
) -> dict[str, Any]:
    """The steady-rate sweep (bench.sweep): ferry, then MM2, each through every rate."""
    settings = sweep.SweepSettings(
        rates=args.sweep_rates,
        seconds=args.sweep_seconds,
        warmup=args.sweep_warmup,
        settle=args.sweep_settle,
        partitions=args.partitions,
        value_bytes=args.value_bytes,
        timeout=args.timeout,
    )
    note(
        f"sweep: {', '.join(f'{r:,.0f}' for r in settings.rates)} records/s, "
        f"{settings.warmup:.0f} s warm-up + {settings.seconds:.0f} s timed each"
    )
    replicators: list[sweep.Replicator] = [
        Ferry(bootstraps, args.set),
        MirrorMaker2(bootstraps, tasks=args.partitions),
    ]
    return sweep.run_sweep(replicators, bootstraps, values, settings, work, counter, note)


def main() -> int:
    args = parse_args()
    if args.render is not None:
        result = json.loads(args.render.read_text())
        table = markdown(result)
        args.render.with_suffix(".md").write_text(table)
        write_chart(args.render.parent, args.render.stem, result)
        print(table)
        return 0
    compile_ferry()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    local = args.bootstrap_a is None
    try:
        if local:
            note("starting two local clusters")
            with local_clusters(work / "clusters") as bootstraps:
                warm_up(bootstraps[0])
                warm_up(bootstraps[1])
                pair = (bootstraps[0], bootstraps[1])
                limits, copies, latencies, swept = run_all(args, pair, work)
        else:
            bootstraps = (args.bootstrap_a, args.bootstrap_b)
            limits, copies, latencies, swept = run_all(args, bootstraps, work)
    finally:
        if args.keep_temp:
            note(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    result = report(args, limits, copies, latencies, local, swept)
    print(write_results(args.out, args.name, result))
    wrong = [c for c in copies if c.target_records < c.records]
    if wrong:
        note(f"error: {len(wrong)} run(s) left the target short of records")
        return 1
    if swept is not None and swept["errors"]:
        note(f"error: the sweep of {', '.join(sorted(swept['errors']))} ended early")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
