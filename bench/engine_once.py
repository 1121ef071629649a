"""Throughput of `ferry run --once`: how fast one flow copies a preloaded topic, end to end.

Measures, per run, the wall-clock time of the whole `ferry run -c CFG --once --json` process
(Python and JVM start-up, Spark session, topic creation on the target, every micro-batch,
shutdown), the CPU seconds and peak resident memory of its process tree (ferry's Python, the
Spark JVM and its Python workers; the Kafka brokers are not included), and ferry's own
`seconds` from the JSON summary (from just before its streaming query starts to its end: no
JVM or Spark session start-up, but still the start-up of Spark's Python workers). Rates are
records and MB (1e6 bytes of key + value) per wall-clock second; the copy-only rates use
ferry's `seconds`. From ferry's state directory it also reports the micro-batches and
`task_seconds` (per batch, its slowest task; summed): the time actually spent copying.

Each run copies a fresh source topic `bench-<uuid>` (N partitions, R records of V random bytes,
keys `k<i>`, spread round-robin over the partitions) into a target topic that does not exist
yet (`A.ferry.bench-<uuid>`, see bench.replicators), with a fresh state directory, so every
run does the same work from nothing: no run benefits from an earlier run's checkpoint, target
topic or cached clients. The flow's `topics` is that one topic name, so topics left by other
runs or other users are never copied. Before the next run both topics are deleted. Preloading
is not timed.

Values come from a pool of distinct random values generated once (at least 4 MiB in all) and
reused in turn, so lz4 finds no repeats within its 64 KiB window: the data is incompressible,
as it would be if records were already compressed or encrypted.

Writes bench/results/engine-once.json and engine-once.md and prints the table. Run from the
repository root: `python -m bench.engine_once [--records N] [--repeat R]`. `make bench`
(`bench.compare`) measures the same next to MirrorMaker 2 and the brokers' limit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import (
    MeasuredProcess,
    TopicCounter,
    cleanup_topics,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    preload,
    warm_up,
)
from bench.replicators import Ferry

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class RunResult:
    wall_seconds: float
    ferry_seconds: float
    records: int
    bytes: int
    skipped: int
    verified_records: int
    exact: bool
    records_per_second: float
    mb_per_second: float
    copy_records_per_second: float
    copy_mb_per_second: float
    cpu_seconds: float
    peak_rss_mb: float
    processes: int
    load_before: float
    retries: int
    batches: int | None
    task_seconds: float | None


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap-a", help="use this source cluster instead of a local one")
    parser.add_argument("--bootstrap-b", help="use this target cluster instead of a local one")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per ferry run, seconds")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--keep-temp", action="store_true", help="keep configs and ferry logs")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra ferry config line, e.g. ferry.batch.max.records=100000 (repeatable)",
    )
    args = parser.parse_args()
    if (args.bootstrap_a is None) != (args.bootstrap_b is None):
        parser.error("give both --bootstrap-a and --bootstrap-b, or neither")
    if any("=" not in setting for setting in args.set):
        parser.error("--set takes KEY=VALUE")
    return args


# --- the measured process ---------------------------------------------------------------------


def flow_stats(state: Path) -> dict[str, Any]:
    """Micro-batches and the sum of each batch's slowest task, from ferry's stats file."""
    try:
        stats = json.loads((state / "A-to-B" / "stats.json").read_text())
    except (OSError, json.JSONDecodeError):
        stats = {}
    busy = stats.get("busy_seconds")
    return {
        "batches": stats.get("batches"),
        "task_seconds": None if busy is None else round(busy, 3),
    }


def retries(stderr: Path) -> int:
    """How often ferry said it was retrying (a cluster looked unreachable, a query restarted)."""
    return stderr.read_text(errors="replace").count("retrying in")


def one_run(
    args: argparse.Namespace,
    bootstraps: tuple[str, str],
    values: list[bytes],
    work: Path,
    index: int,
) -> RunResult:
    bootstrap_a, bootstrap_b = bootstraps
    topic = f"bench-{uuid.uuid4()}"
    ferry = Ferry(bootstraps, args.set)
    create_topic(bootstrap_a, topic, args.partitions)
    try:
        payload = preload(bootstrap_a, topic, args.partitions, args.records, values)
        run_dir = work / f"run-{index}"
        proc = ferry.start(run_dir, topic, once=True)
        try:
            code = proc.wait(args.timeout)
        except BaseException:
            proc.kill()
            raise
        assert proc.ended is not None
        wall = proc.ended - proc.began
        if code != 0:
            raise RuntimeError(f"ferry run exited {code} after {wall:.1f}s:\n{proc.stderr_tail()}")
        summary = json.loads((run_dir / "ferry.out").read_text())["A->B"]
        counter = TopicCounter(bootstrap_b)
        try:
            verified = counter.count(ferry.target(topic))
        finally:
            counter.close()
        return result_of(args, payload, summary, verified, wall, proc, run_dir)
    finally:
        cleanup_topics(bootstrap_a, [topic])
        ferry.cleanup(topic)


def result_of(
    args: argparse.Namespace,
    payload: int,
    summary: dict[str, Any],
    verified: int,
    wall: float,
    usage: MeasuredProcess,
    run_dir: Path,
) -> RunResult:
    # ferry's counts include the `heartbeats` topic, which every flow copies too.
    exact = verified == args.records <= summary["records"]
    if not exact:
        print(
            f"error: expected {args.records} records on the target; the target topic holds "
            f"{verified} and ferry reports {summary['records']} copied",
            file=sys.stderr,
        )
    if summary["bytes"] < payload:
        print(f"note: ferry reports {summary['bytes']} bytes, preloaded {payload}", file=sys.stderr)
    copy_seconds = float(summary["seconds"]) or wall
    return RunResult(
        wall_seconds=round(wall, 3),
        ferry_seconds=round(copy_seconds, 3),
        records=summary["records"],
        bytes=summary["bytes"],
        skipped=summary["skipped"],
        verified_records=verified,
        records_per_second=round(args.records / wall, 1),
        mb_per_second=round(payload / wall / 1e6, 2),
        copy_records_per_second=round(args.records / copy_seconds, 1),
        copy_mb_per_second=round(payload / copy_seconds / 1e6, 2),
        cpu_seconds=round(usage.cpu_seconds, 2),
        peak_rss_mb=round(usage.sampler.peak_rss_bytes / 1e6, 1),
        processes=usage.sampler.processes,
        load_before=round(usage.load_before, 2),
        exact=exact,
        retries=retries(run_dir / "ferry.err"),
        **flow_stats(run_dir / "state"),
    )


# --- report -----------------------------------------------------------------------------------


def machine_info(local: bool) -> dict[str, Any]:
    import confluent_kafka
    import pyspark

    from ferry.local.distribution import KAFKA_VERSION

    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "kafka": KAFKA_VERSION if local else "external clusters (version not checked)",
        "pyspark": pyspark.__version__,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }


def median_of(runs: list[RunResult], field: str) -> float | None:
    values = [getattr(r, field) for r in runs if getattr(r, field) is not None]
    return round(float(statistics.median(values)), 3) if values else None


def report(args: argparse.Namespace, runs: list[RunResult], local: bool) -> dict[str, Any]:
    fields = (
        "wall_seconds",
        "ferry_seconds",
        "records_per_second",
        "mb_per_second",
        "copy_records_per_second",
        "copy_mb_per_second",
        "cpu_seconds",
        "peak_rss_mb",
        "task_seconds",
    )
    return {
        "benchmark": "engine-once",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "records": args.records,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "repeat": args.repeat,
        "ferry_settings": args.set,
        "per_run_seconds": [r.wall_seconds for r in runs],
        "median": {field: median_of(runs, field) for field in fields},
        "runs": [asdict(r) for r in runs],
        "machine": machine_info(local),
        "method": (
            "wall clock of `ferry run --once --json` (whole process); MB = 1e6 bytes of key + "
            "value; copy_* rates use ferry's own `seconds` (query start to end); fresh source "
            "topic, target topic and state dir per run; CPU and RSS of ferry's process tree"
        ),
    }


def markdown(result: dict[str, Any]) -> str:
    machine = result["machine"]
    settings = ", ".join(result["ferry_settings"]) or "none"
    lines = [
        f"# ferry run --once: {result['records']:,} records x {result['value_bytes']} B, "
        f"{result['partitions']} partitions",
        "",
        f"{result['date']}; {machine['cpu_count']} CPUs, Python {machine['python']}, "
        f"Kafka {machine['kafka']}, pyspark {machine['pyspark']}, "
        f"librdkafka {machine['librdkafka']}; extra ferry settings: {settings}. "
        "Rates per wall-clock second of the whole process; copy rates per second of ferry's "
        "own timing (no JVM or Spark session start-up); task s: time in copy tasks (per "
        "batch its slowest). "
        "MB = 1e6 bytes of key + value. load: the machine's 1-minute load average as the run "
        "started (the brokers and anything else running count too).",
        "",
        "| run | wall s | ferry s | task s | records/s | MB/s | copy records/s | copy MB/s "
        "| CPU s | peak RSS MB | batches | retries | load | target records |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for index, run in enumerate(result["runs"], start=1):
        target = f"{run['verified_records']:,}" + ("" if run["exact"] else " (WRONG)")
        tail = [str(run["batches"]), str(run["retries"]), f"{run['load_before']:.1f}", target]
        lines.append(row(str(index), run, tail))
    lines.append(row("median", result["median"], ["", "", "", ""]))
    return "\n".join(lines) + "\n"


def row(label: str, values: dict[str, Any], tail: list[str]) -> str:
    cells = [
        label,
        f"{values['wall_seconds']:.1f}",
        f"{values['ferry_seconds']:.1f}",
        "" if values["task_seconds"] is None else f"{values['task_seconds']:.1f}",
        f"{values['records_per_second']:,.0f}",
        f"{values['mb_per_second']:.1f}",
        f"{values['copy_records_per_second']:,.0f}",
        f"{values['copy_mb_per_second']:.1f}",
        f"{values['cpu_seconds']:.1f}",
        f"{values['peak_rss_mb']:,.0f}",
        *tail,
    ]
    return "| " + " | ".join(cells) + " |"


def write_results(out: Path, result: dict[str, Any]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine-once.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (out / "engine-once.md").write_text(table)
    return table


# --- main -------------------------------------------------------------------------------------


def run_all(args: argparse.Namespace, bootstraps: tuple[str, str], work: Path) -> list[RunResult]:
    values = make_values(args.value_bytes)
    runs = []
    for index in range(1, args.repeat + 1):
        print(f"run {index}/{args.repeat}: preloading and copying ...", file=sys.stderr)
        run = one_run(args, bootstraps, values, work, index)
        print(
            f"run {index}/{args.repeat}: {run.wall_seconds:.1f}s wall, "
            f"{run.ferry_seconds:.1f}s ferry, {run.records_per_second:,.0f} records/s",
            file=sys.stderr,
        )
        runs.append(run)
    return runs


def main() -> int:
    args = parse_args()
    compile_ferry()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    local = args.bootstrap_a is None
    try:
        if local:
            with local_clusters(work / "clusters") as bootstraps:
                warm_up(bootstraps[1])
                runs = run_all(args, bootstraps, work)
        else:
            runs = run_all(args, (args.bootstrap_a, args.bootstrap_b), work)
    finally:
        if args.keep_temp:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(write_results(args.out, report(args, runs, local)))
    if not all(run.exact for run in runs):
        print("error: a target did not hold exactly the records copied", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
