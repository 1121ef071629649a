"""Where `ferry run --once` spends its CPU: seconds per process kind and, in the copy workers,
per thread (the Python main thread against librdkafka's threads).

Two local clusters (`ferry local up`), one untimed first run on a small topic (so the driver
JVM's class archive exists, as on a machine that ran ferry before; see bench.compare), then one
measured `ferry run --once` copying a preloaded topic (R records of V random bytes, N
partitions, as bench.compare) onto a fresh target topic. While it runs, /proc is sampled every
`--interval` seconds: every process of ferry's tree (utime + stime of /proc/<pid>/stat),
classified by its /proc/<pid>/cmdline into a kind:

- `ferry driver`: the `ferry run` process itself (ferry's Python and Spark's py4j client);
- `Spark driver JVM` (and `Spark launcher JVM`, should a launcher appear);
- `copy workers`: the task workers, forked by Spark's worker daemon for `pyspark.worker`
  (`python -m ferry.engine.spark.python_workers pyspark.worker`): they read the source and write
  the target;
- `task worker daemon`: that daemon itself (`spark.python.daemon.module`), which forks them;
- `python: <module>`: Spark's other Python processes, by module: the data source planners
  (`python -m pyspark.daemon pyspark.sql.worker.<planner>`, a daemon and its fork each:
  lookup, creation, read planning, the writer, the streaming sink runner) and the streaming
  source runner;
- `other: <comm>`: anything else (shells, chmod ...).

Every Python process's threads are sampled too (/proc/<pid>/task/<tid>/stat; the thread's
comm is in it): the main thread (tid = pid) apart from librdkafka's (`rdk:main`,
`rdk:broker*` ...). The last sample of each process (pid, start time) and thread counts, so
processes and threads that exited still count, less their last interval (threads that
exited between samples leave a remainder, reported as unattributed).

Writes bench/results/cpu-breakdown.json and cpu-breakdown.md (or `--out`) and prints the
table. Run from the repository root: `python -m bench.cpu_breakdown [--records N]
[--partitions P] [--out DIR] [--set KEY=VALUE ...]`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.compare import ferry_details
from bench.engine_once import machine_info
from bench.harness import (
    CLOCK_TICKS,
    MeasuredProcess,
    TopicCounter,
    cleanup_topics,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    preload,
    process_tree,
    read_stat,
    warm_up,
)
from bench.replicators import Ferry
from bench.stats import MB

RESULTS_DIR = Path(__file__).resolve().parent / "results"
NAME = "cpu-breakdown"

DRIVER = "ferry driver (ferry run)"
JVM = "Spark driver JVM"
LAUNCHER = "Spark launcher JVM"
COPY = "copy workers (pyspark.worker forks)"
DAEMON = "task worker daemon (forks only)"
MAIN_THREAD = "Python main thread"
UNATTRIBUTED = "threads exited between samples"
DAEMON_MODULES = {"pyspark.daemon", "ferry.engine.spark.python_workers"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--records", type=int, default=2_000_000)
    add("--value-bytes", type=int, default=1024)
    add("--partitions", type=int, default=8)
    add("--interval", type=float, default=0.2, help="seconds between /proc samples")
    add("--timeout", type=float, default=1800.0, help="per ferry run, seconds")
    add("--out", type=Path, default=RESULTS_DIR)
    add("--keep-temp", action="store_true", help="keep configs and ferry logs")
    add(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra ferry config line, e.g. ferry.bins=4 (repeatable)",
    )
    args = parser.parse_args()
    if any("=" not in setting for setting in args.set):
        parser.error("--set takes KEY=VALUE")
    return args


def note(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --- classifying processes and threads --------------------------------------------------------


def read_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_python(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]).startswith("python")


def python_module(argv: list[str]) -> tuple[str, str | None]:
    """What a Python command line runs: the `-m` module (or `-c`, or the script's name) and
    its first argument; for Spark's worker daemons that is the worker module forks run."""
    args = argv[1:]
    for index, arg in enumerate(args):
        rest = args[index + 1 :]
        if arg == "-m" and rest:
            return rest[0], rest[1] if len(rest) > 1 else None
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:], rest[0] if rest else None
        if arg.startswith("-c"):
            return "-c", None
        if not arg.startswith("-"):
            return os.path.basename(arg), rest[0] if rest else None
    return "(interactive)", None


def classify(pid: int, root: int, argv: list[str], parent_argv: list[str] | None) -> str:
    """A process's kind from its command line (and whether it is a fork of its parent).

    Spark (4.x) starts every Python process but the streaming source runner as a worker
    daemon, `python -m <daemon module> <worker module>`, which forks a process per worker:
    `pyspark.worker` (ferry's daemon module) for tasks, `pyspark.sql.worker.<planner>` for
    the data source planners. The forks of the task daemon are the copy workers; daemons and
    forks of the others count under their worker module's name."""
    if pid == root:
        return DRIVER
    if not argv:
        return "other: (no command line)"
    name = os.path.basename(argv[0])
    if name.startswith("java"):
        return LAUNCHER if "org.apache.spark.launcher.Main" in argv else JVM
    if is_python(argv):
        module, argument = python_module(argv)
        forked = parent_argv == argv  # a fork of its parent that did not exec
        if module in DAEMON_MODULES:
            if argument in (None, "pyspark.worker"):
                return COPY if forked else DAEMON
            return f"python: {argument}"
        return f"python: {module}" + (" (fork)" if forked else "")
    return f"other: {name}"


def thread_group(pid: int, tid: int, comm: str) -> str:
    if tid == pid:
        return MAIN_THREAD
    if comm.startswith("rdk:"):
        base = re.sub(r"[-\d]+$", "", comm)
        return base + ("*" if base != comm else "")
    return f"other thread: {comm}"


def read_threads(pid: int) -> dict[tuple[int, int], tuple[str, int]]:
    """(tid, start time) -> (comm, utime + stime ticks) of each live thread of `pid`."""
    threads = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for entry in tids:
        try:
            text = Path(f"/proc/{pid}/task/{entry}/stat").read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        threads[(int(entry), int(fields[19]))] = (comm, int(fields[11]) + int(fields[12]))
    return threads


# --- the sampler ------------------------------------------------------------------------------


@dataclass
class ProcessRecord:
    pid: int
    ppid: int
    kind: str
    argv: list[str]
    ticks: int = 0
    first_seen: float = 0.0
    last_seen: float = 0.0
    threads: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)

    @property
    def thread_ticks(self) -> dict[str, int]:
        groups: dict[str, int] = {}
        for (tid, _start), (comm, ticks) in self.threads.items():
            group = thread_group(self.pid, tid, comm)
            groups[group] = groups.get(group, 0) + ticks
        if self.threads:
            rest = self.ticks - sum(ticks for _comm, ticks in self.threads.values())
            if rest > 0:
                groups[UNATTRIBUTED] = rest
        return groups


class KindSampler:
    """Samples ferry's process tree: CPU ticks per process (pid, start time), its kind by
    command line (read again each sample: a process seen between fork and exec still has its
    parent's), and the threads of every Python process."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.processes: dict[tuple[int, int], ProcessRecord] = {}
        self.samples = 0
        self.sample_seconds = 0.0  # the sampler's own time, a check on its overhead

    def sample(self, at: float) -> None:
        began = time.monotonic()
        tree = process_tree(self.root)
        argvs = {pid: read_cmdline(pid) for pid in tree}
        for pid, (start, ticks, _rss) in tree.items():
            stat = read_stat(pid)
            argv = argvs[pid]
            if stat is None:
                continue
            ppid = stat[0]
            parent_argv = argvs.get(ppid) if ppid in tree else None
            kind = classify(pid, self.root, argv, parent_argv)
            record = self.processes.get((pid, start))
            if record is None:
                record = ProcessRecord(pid, ppid, kind, argv, first_seen=at)
                self.processes[(pid, start)] = record
            if argv:  # a zombie's command line is empty: keep what it ran
                record.kind, record.argv = kind, argv
            record.ticks = max(record.ticks, stat[2], ticks)
            record.last_seen = at
            if pid != self.root and is_python(record.argv):
                for key, value in read_threads(pid).items():
                    record.threads[key] = value
        self.samples += 1
        self.sample_seconds += time.monotonic() - began

    @property
    def ticks(self) -> int:
        return sum(record.ticks for record in self.processes.values())


# --- runs -------------------------------------------------------------------------------------


def first_run(
    bootstraps: tuple[str, str], values: list[bytes], args: argparse.Namespace, work: Path
) -> None:
    """Untimed `ferry run --once` of a small topic (as bench.compare's first runs): the driver
    JVM's class archive is written at the end of a machine's first run."""
    topic = f"bench-first-{uuid.uuid4()}"
    ferry = Ferry(bootstraps, args.set)
    create_topic(bootstraps[0], topic, args.partitions)
    try:
        preload(bootstraps[0], topic, args.partitions, 1000 * args.partitions, values)
        proc = ferry.start(work / "first-run", topic, once=True)
        try:
            code = proc.wait(args.timeout)
        except BaseException:
            proc.kill()
            raise
        if code != 0:
            raise RuntimeError(f"first ferry run exited {code}:\n{proc.stderr_tail()}")
    finally:
        cleanup_topics(bootstraps[0], [topic])
        ferry.cleanup(topic)


@dataclass
class Measured:
    records: int
    bytes: int
    target_records: int
    wall_seconds: float  # process start to exit
    first_seconds: float | None  # process start to the first record on the target
    complete_seconds: float | None  # process start until the target held every record
    complete_cpu_seconds: float | None  # sampled tree CPU then
    rusage_cpu_seconds: float  # the reaped `ferry run` and only the children it waited for
    sampler: KindSampler
    details: dict[str, Any]


def measured_run(
    bootstraps: tuple[str, str],
    values: list[bytes],
    args: argparse.Namespace,
    work: Path,
    counter: TopicCounter,
) -> Measured:
    topic = f"bench-{uuid.uuid4()}"
    ferry = Ferry(bootstraps, args.set)
    target = ferry.target(topic)
    create_topic(bootstraps[0], topic, args.partitions)
    try:
        note(f"preloading {args.records:,} records into {topic}")
        payload = preload(bootstraps[0], topic, args.partitions, args.records, values)
        run_dir = work / "measured"
        note("measured run: ferry run --once")
        proc = ferry.start(run_dir, topic, once=True)
        try:
            sampler, first, complete, complete_cpu = watch(proc, counter, target, args)
        except BaseException:
            proc.kill()
            raise
        assert proc.ended is not None
        if proc.returncode != 0:
            raise RuntimeError(f"ferry run exited {proc.returncode}:\n{proc.stderr_tail()}")
        held = counter.count(target)
        return Measured(
            records=args.records,
            bytes=payload,
            target_records=held,
            wall_seconds=proc.ended - proc.began,
            first_seconds=first,
            complete_seconds=complete,
            complete_cpu_seconds=complete_cpu,
            rusage_cpu_seconds=proc.cpu_seconds,  # never sampled by itself: its rusage
            sampler=sampler,
            details=ferry_details(run_dir),
        )
    finally:
        cleanup_topics(bootstraps[0], [topic])
        ferry.cleanup(topic)


def watch(
    proc: MeasuredProcess, counter: TopicCounter, target: str, args: argparse.Namespace
) -> tuple[KindSampler, float | None, float | None, float | None]:
    """Sample until `proc` exits; also note when the first and the last record arrived."""
    sampler = KindSampler(proc.proc.pid)
    first = complete = complete_cpu = None
    next_sample = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if now >= next_sample:
            sampler.sample(now - proc.began)
            next_sample = now + args.interval
        if complete is None:
            held = counter.count(target)
            seen = time.monotonic() - proc.began
            if held > 0 and first is None:
                first = seen
            if held >= args.records:
                complete = seen
                sampler.sample(seen)
                complete_cpu = sampler.ticks / CLOCK_TICKS
        if now - proc.began > args.timeout:
            raise TimeoutError(f"ferry run still running after {args.timeout:.0f}s")
        time.sleep(0.05)
    return sampler, first, complete, complete_cpu


# --- report -----------------------------------------------------------------------------------


def per_record_us(seconds: float, records: int) -> float:
    return round(seconds / records * 1e6, 2) if records else 0.0


def report(args: argparse.Namespace, run: Measured) -> dict[str, Any]:
    records = list(run.sampler.processes.values())
    total_ticks = run.sampler.ticks
    kinds: dict[str, dict[str, Any]] = {}
    for record in records:
        kind = kinds.setdefault(record.kind, {"processes": 0, "ticks": 0, "first_seen": None})
        kind["processes"] += 1
        kind["ticks"] += record.ticks
        seen = kind["first_seen"]
        kind["first_seen"] = record.first_seen if seen is None else min(seen, record.first_seen)
    kind_rows = [
        {
            "kind": name,
            "processes": value["processes"],
            "cpu_seconds": round(value["ticks"] / CLOCK_TICKS, 2),
            "share": round(value["ticks"] / total_ticks, 4) if total_ticks else 0.0,
            "first_seen_seconds": round(value["first_seen"], 2),
        }
        for name, value in sorted(kinds.items(), key=lambda item: -item[1]["ticks"])
    ]
    threads: dict[str, dict[str, int]] = {}  # kind -> thread group -> ticks
    thread_counts: dict[str, dict[str, int]] = {}
    for record in records:
        if not record.threads:
            continue
        groups = threads.setdefault(record.kind, {})
        counts = thread_counts.setdefault(record.kind, {})
        for group, ticks in record.thread_ticks.items():
            groups[group] = groups.get(group, 0) + ticks
        for (tid, _start), (comm, _ticks) in record.threads.items():
            group = thread_group(record.pid, tid, comm)
            counts[group] = counts.get(group, 0) + 1
    copy_ticks = kinds.get(COPY, {}).get("ticks", 0)
    copy_threads = [
        {
            "thread": group,
            "threads": thread_counts.get(COPY, {}).get(group, 0),
            "cpu_seconds": round(ticks / CLOCK_TICKS, 2),
            "share": round(ticks / copy_ticks, 4) if copy_ticks else 0.0,
            "us_per_record": per_record_us(ticks / CLOCK_TICKS, run.records),
        }
        for group, ticks in sorted(threads.get(COPY, {}).items(), key=lambda item: -item[1])
    ]
    tree_cpu = total_ticks / CLOCK_TICKS
    copy_cpu = copy_ticks / CLOCK_TICKS
    return {
        "benchmark": NAME,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "records": run.records,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "ferry_settings": args.set,
        "bytes": run.bytes,
        "target_records": run.target_records,
        "wall_seconds": round(run.wall_seconds, 2),
        "first_record_seconds": _round(run.first_seconds),
        "complete_seconds": _round(run.complete_seconds),
        "cpu_seconds": round(tree_cpu, 2),
        "cpu_seconds_at_complete": _round(run.complete_cpu_seconds),
        "rusage_cpu_seconds": round(run.rusage_cpu_seconds, 2),
        "copy_worker_cpu_seconds": round(copy_cpu, 2),
        "us_per_record": per_record_us(tree_cpu, run.records),
        "copy_worker_us_per_record": per_record_us(copy_cpu, run.records),
        "mb_per_cpu_second": round(run.bytes / MB / tree_cpu, 2) if tree_cpu else None,
        "kinds": kind_rows,
        "copy_worker_threads": copy_threads,
        "threads_by_kind": {
            kind: {group: round(ticks / CLOCK_TICKS, 2) for group, ticks in groups.items()}
            for kind, groups in threads.items()
        },
        "processes": [
            {
                "pid": record.pid,
                "ppid": record.ppid,
                "kind": record.kind,
                "cmdline": " ".join(record.argv)[:400],
                "cpu_seconds": round(record.ticks / CLOCK_TICKS, 2),
                "first_seen_seconds": round(record.first_seen, 2),
                "last_seen_seconds": round(record.last_seen, 2),
                "threads": {
                    group: round(ticks / CLOCK_TICKS, 2)
                    for group, ticks in record.thread_ticks.items()
                },
            }
            for record in sorted(records, key=lambda r: r.first_seen)
        ],
        "sampling": {
            "interval_seconds": args.interval,
            "samples": run.sampler.samples,
            "sampler_seconds": round(run.sampler.sample_seconds, 2),
        },
        "details": run.details,
        "machine": machine_info(True),
        "method": (
            "utime + stime from /proc/<pid>/stat of every process in `ferry run --once`'s "
            "tree and /proc/<pid>/task/<tid>/stat of every Python process's threads, sampled "
            "every interval until ferry exited; the last sample of each process and thread "
            "counts (each loses at most its last interval); kinds by /proc/<pid>/cmdline. "
            "One untimed small run first (the driver JVM's class archive). The brokers and "
            "this benchmark are not included. rusage_cpu_seconds: the reaped `ferry run` and "
            "only the descendants it waited for (not the JVM), for comparison."
        ),
    }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _fmt(value: float | None, pattern: str = "{:,.1f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def markdown(r: dict[str, Any]) -> str:
    machine = r["machine"]
    settings = ", ".join(r["ferry_settings"]) or "none"
    lines = [
        f"# ferry run --once, CPU by process kind: {r['records']:,} records x "
        f"{r['value_bytes']} B, {r['partitions']} partitions",
        "",
        f"{r['date']}; {machine['cpu_count']} CPUs (shared with both brokers), Python "
        f"{machine['python']}, Kafka {machine['kafka']}, pyspark {machine['pyspark']}, "
        f"librdkafka {machine['librdkafka']}; extra ferry settings: {settings}. One untimed "
        f"small run first. /proc sampled every {r['sampling']['interval_seconds']} s "
        f"({r['sampling']['samples']} samples) until `ferry run` exited.",
        "",
        "| wall s | first record s | target complete s | records | CPU s | CPU s at complete "
        "| us CPU per record | copy workers us per record | MB per CPU s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {r['wall_seconds']:.1f} | {_fmt(r['first_record_seconds'])} "
        f"| {_fmt(r['complete_seconds'])} | {r['target_records']:,} | {r['cpu_seconds']:.1f} "
        f"| {_fmt(r['cpu_seconds_at_complete'])} "
        f"| {r['us_per_record']:.1f} | {r['copy_worker_us_per_record']:.1f} "
        f"| {_fmt(r['mb_per_cpu_second'], '{:.2f}')} |",
        "",
        "| kind | processes | CPU s | share | first seen s |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in r["kinds"]:
        lines.append(
            f"| {kind['kind']} | {kind['processes']} | {kind['cpu_seconds']:.2f} "
            f"| {kind['share'] * 100:.1f}% | {kind['first_seen_seconds']:.1f} |"
        )
    processes = sum(kind["processes"] for kind in r["kinds"])
    lines += [
        f"| **whole tree** | {processes} | {r['cpu_seconds']:.2f} | 100% | |",
        "",
        f"Copy workers by thread ({r['copy_worker_cpu_seconds']:.2f} CPU s in all):",
        "",
        "| thread | threads | CPU s | share | us per record |",
        "|---|---:|---:|---:|---:|",
    ]
    for thread in r["copy_worker_threads"]:
        count = "" if thread["thread"] == UNATTRIBUTED else str(thread["threads"])
        lines.append(
            f"| {thread['thread']} | {count} | {thread['cpu_seconds']:.2f} "
            f"| {thread['share'] * 100:.1f}% | {thread['us_per_record']:.2f} |"
        )
    lines += [
        "",
        "wall s: `ferry run` start to exit; first record / target complete: from start, target "
        "watermarks polled. CPU s: sum over the tree of each process's last sample (a process "
        "loses at most its last interval); CPU s at complete: the same when the target held "
        "every record. Per record: CPU s / records preloaded. "
        f"{UNATTRIBUTED}: a worker's CPU less its threads' last samples. MB = 1e6 bytes of "
        "key + value.",
    ]
    return "\n".join(lines) + "\n"


def write_results(out: Path, result: dict[str, Any]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (out / f"{NAME}.md").write_text(table)
    return table


# --- main -------------------------------------------------------------------------------------


def main() -> int:
    args = parse_args()
    compile_ferry()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    try:
        note("starting two local clusters")
        with local_clusters(work / "clusters") as bootstraps:
            warm_up(bootstraps[0])
            warm_up(bootstraps[1])
            values = make_values(args.value_bytes)
            note("first run (untimed): ferry")
            first_run(bootstraps, values, args, work)
            counter = TopicCounter(bootstraps[1])
            try:
                run = measured_run(bootstraps, values, args, work, counter)
            finally:
                counter.close()
    finally:
        if args.keep_temp:
            note(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(write_results(args.out, report(args, run)))
    if run.target_records < run.records:
        note(f"error: the target holds {run.target_records:,} of {run.records:,} records")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
