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
yet, with a fresh state directory, so every run does the same work from nothing: no run
benefits from an earlier run's checkpoint, target topic or cached clients. The flow's `topics`
is that one topic name, so topics left by other runs or other users are never copied. Before
the next run both topics are deleted. Preloading is not timed.

Values come from a pool of distinct random values generated once (at least 4 MiB in all) and
reused in turn, so lz4 finds no repeats within its 64 KiB window: the data is incompressible,
as it would be if records were already compressed or encrypted.

Writes bench/results/engine-once.json and engine-once.md and prints the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
VALUE_POOL_BYTES = 4 * 1024 * 1024
SAMPLE_INTERVAL = 0.25
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


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


@dataclass
class TreeUsage:
    cpu_seconds: float
    peak_rss_bytes: int
    processes: int
    load_before: float  # the machine's 1-minute load average at the start: others' work too


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


# --- clusters and topics ----------------------------------------------------------------------


def ferry_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ferry", *args]


def ferry_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


@contextmanager
def local_clusters(directory: Path) -> Iterator[tuple[str, str]]:
    """Two fresh single-broker clusters, always stopped again (even if `up` half failed)."""
    try:
        up = subprocess.run(
            ferry_command("local", "up", "--clusters", "A,B", "--dir", str(directory), "--json"),
            capture_output=True,
            text=True,
            check=False,
            env=ferry_env(),
        )
        if up.returncode != 0:
            raise RuntimeError(f"ferry local up failed:\n{up.stderr[-3000:]}")
        bootstraps = json.loads(up.stdout)
        yield bootstraps["A"], bootstraps["B"]
    finally:
        subprocess.run(
            ferry_command("local", "down", "--dir", str(directory)),
            capture_output=True,
            check=False,
            env=ferry_env(),
        )


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    admin.create_topics([new])[topic].result(30)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(60)


def make_values(value_bytes: int) -> list[bytes]:
    count = max(1, -(-VALUE_POOL_BYTES // max(1, value_bytes)))
    return [os.urandom(value_bytes) for _ in range(count)]


def preload(bootstrap: str, topic: str, partitions: int, records: int, values: list[bytes]) -> int:
    """Produce `records` records and wait for every ack; returns the key + value bytes."""
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "on_delivery": on_delivery,
        }
    )
    produce = producer.produce
    pool = len(values)
    total = 0
    for i in range(records):
        key = f"k{i}".encode()
        value = values[i % pool]
        while True:
            try:
                produce(topic, value, key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        total += len(key) + len(value)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) > 0 or failures:
        raise RuntimeError(f"preloading {topic} failed: {failures[:1] or 'flush timed out'}")
    return total


def warm_up(bootstrap: str) -> None:
    """Have a fresh cluster hand out its first producer id before anything is timed.

    A new KRaft cluster answers the first InitProducerId with COORDINATOR_LOAD_IN_PROGRESS for
    a while; without this the first measured run would pay for it and later ones would not.
    """
    topic = f"bench-warmup-{uuid.uuid4()}"
    create_topic(bootstrap, topic, 1)
    try:
        preload(bootstrap, topic, 1, 1, [b"warm-up"])
    finally:
        cleanup_topics(bootstrap, [topic])


def count_records(bootstrap: str, topic: str) -> int:
    """Sum over partitions of high minus low watermark: what the topic holds now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        if metadata.error is not None:
            raise RuntimeError(f"target topic {topic}: {metadata.error}")
        total = 0
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)
            total += high - low
        return total
    finally:
        consumer.close()


def write_config(
    path: Path, bootstraps: tuple[str, str], topic: str, state: Path, extra: list[str]
) -> None:
    bootstrap_a, bootstrap_b = bootstraps
    lines = [
        f"{key.strip()}: {value.strip()}" for key, _, value in (s.partition("=") for s in extra)
    ]
    # Exactly one topic, not `bench-.*`: deleting a topic is asynchronous, so a pattern could
    # pick up the previous run's topic (or another user's) and copy it too.
    path.write_text(
        "clusters:\n"
        f'  A: {{bootstrap.servers: "{bootstrap_a}"}}\n'
        f'  B: {{bootstrap.servers: "{bootstrap_b}"}}\n'
        "A->B.enabled: true\n"
        f"A->B.topics: {topic}\n"
        "replication.factor: 1\n"
        "offset-syncs.topic.replication.factor: 1\n"
        f"ferry.state.dir: {state}\n" + "".join(f"{line}\n" for line in lines)
    )


# --- the measured process ---------------------------------------------------------------------


def read_stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, start time, utime + stime in ticks, rss in pages) of a live process, or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), int(fields[21])


def process_tree(root: int) -> dict[int, tuple[int, int, int]]:
    """Every live descendant of `root` (and root): pid -> (start time, cpu ticks, rss pages)."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree[pid] = stats[pid][1:]
            todo.extend(children.get(pid, []))
    return tree


class TreeSampler:
    """Polls /proc for the CPU ticks and total RSS of a process tree."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.ticks: dict[tuple[int, int], int] = {}
        self.peak_rss_bytes = 0

    def sample(self) -> None:
        tree = process_tree(self.root)
        for pid, (start, cpu, _rss) in tree.items():
            self.ticks[(pid, start)] = cpu
        rss = sum(pages for _start, _cpu, pages in tree.values()) * PAGE_SIZE
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.ticks.values()) / CLOCK_TICKS


def run_measured(command: list[str], log: Path, timeout: float) -> tuple[int, float, TreeUsage]:
    """Run `command` (stdout to `log`.out, stderr to `log`.err); exit code, wall time, usage.

    CPU: the larger of what polling /proc saw (misses each process's last interval) and the
    kernel's rusage of the reaped tree (misses processes orphaned before they exit), so it is
    a slight underestimate at worst. Peak RSS: the largest sum over the tree at one sample;
    pages that forked Python workers share with their daemon count once per process, so it
    overstates what the tree really holds.
    """
    load_before = os.getloadavg()[0]
    with log.with_suffix(".out").open("wb") as out, log.with_suffix(".err").open("wb") as err:
        began = time.monotonic()
        proc = subprocess.Popen(
            command, stdout=out, stderr=err, env=ferry_env(), start_new_session=True
        )
        sampler = TreeSampler(proc.pid)
        try:
            status, rusage = wait_sampling(proc.pid, sampler, timeout)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: ferry, its JVM and workers
            os.wait4(proc.pid, 0)
            raise
        wall = time.monotonic() - began
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    reaped = rusage.ru_utime + rusage.ru_stime
    usage = TreeUsage(
        max(sampler.cpu_seconds, reaped), sampler.peak_rss_bytes, len(sampler.ticks), load_before
    )
    return proc.returncode, wall, usage


def wait_sampling(pid: int, sampler: TreeSampler, timeout: float) -> tuple[int, Any]:
    """Wait for `pid` to exit, sampling its tree meanwhile; its wait status and rusage."""
    deadline = time.monotonic() + timeout
    next_sample = 0.0
    while True:
        done, status, rusage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, rusage
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError(f"ferry run still running after {timeout:.0f}s; stopped it")
        if now >= next_sample:
            sampler.sample()
            next_sample = now + SAMPLE_INTERVAL
        time.sleep(0.02)


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
    target = f"A.{topic}"
    create_topic(bootstrap_a, topic, args.partitions)
    try:
        payload = preload(bootstrap_a, topic, args.partitions, args.records, values)
        run_dir = work / f"run-{index}"
        run_dir.mkdir()
        config = run_dir / "ferry.yaml"
        write_config(config, bootstraps, topic, run_dir / "state", args.set)
        command = ferry_command("run", "-c", str(config), "--once", "--json")
        code, wall, usage = run_measured(command, run_dir / "ferry", args.timeout)
        if code != 0:
            tail = (run_dir / "ferry.err").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"ferry run exited {code} after {wall:.1f}s:\n{tail}")
        summary = json.loads((run_dir / "ferry.out").read_text())["A->B"]
        verified = count_records(bootstrap_b, target)
        return result_of(args, payload, summary, verified, wall, usage, run_dir)
    finally:
        cleanup_topics(bootstrap_a, [topic])
        cleanup_topics(bootstrap_b, [target])


def cleanup_topics(bootstrap: str, topics: list[str]) -> None:
    try:
        delete_topics(bootstrap, topics)
    except Exception as exc:  # a missing target topic is expected after a failed run
        print(f"note: could not delete {topics} on {bootstrap}: {exc}", file=sys.stderr)


def result_of(
    args: argparse.Namespace,
    payload: int,
    summary: dict[str, Any],
    verified: int,
    wall: float,
    usage: TreeUsage,
    run_dir: Path,
) -> RunResult:
    exact = verified == args.records == summary["records"]
    if not exact:
        print(
            f"error: expected {args.records} records on the target; the target topic holds "
            f"{verified} and ferry reports {summary['records']} copied",
            file=sys.stderr,
        )
    if summary["bytes"] != payload:
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
        peak_rss_mb=round(usage.peak_rss_bytes / 1e6, 1),
        processes=usage.processes,
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
