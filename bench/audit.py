"""How `ferry audit` scales: millions of small records compared record by record.

Fills a fresh source topic on a local cluster A (R records of V random bytes, keys `k<i>`,
round-robin over N partitions), copies it to B with `ferry run --once`, deletes the first D
copies of remote partition 0 (so the audit has something to find and its range jobs run),
then times one `ferry audit --json` process over the flow. Nothing but the audit is timed.

Measured: the audit process's wall clock (Python and JVM start-up, both clusters read,
joined, the report), records audited per second (source records; the same number of copies
is read from B), and the peak resident memory of the *driver*: the `ferry audit` Python
process plus its JVM child, sampled with psutil every 0.25 s. In local mode that JVM also
hosts Spark's executors, so its figure is an upper bound of the driver's own; Spark's Python
workers (the JVM's children) are reported apart, as is the whole process tree. The audit's
verdict is checked: exactly D missing, nothing else.

Writes bench/results/audit.json and audit.md. `make bench-audit` runs it at 5,000,000 records;
`python -m bench.audit --help` for the knobs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from bench.engine_once import machine_info
from bench.harness import (
    MeasuredProcess,
    cleanup_topics,
    compile_ferry,
    create_topic,
    ferry_command,
    ferry_env,
    local_clusters,
    make_values,
    preload,
    warm_up,
)
from bench.replicators import Ferry

RESULTS_DIR = Path(__file__).resolve().parent / "results"
SAMPLE_SECONDS = 0.25


class DriverMemory:
    """Peak RSS of a driver process and its JVM child(ren), and of the rest of its tree."""

    def __init__(self, pid: int) -> None:
        self._root = psutil.Process(pid)
        self.peak_driver = self.peak_python = self.peak_jvm = self.peak_tree = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> DriverMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(SAMPLE_SECONDS)

    def sample(self) -> None:
        try:
            python = self._root.memory_info().rss
            children = self._root.children(recursive=True)
        except psutil.Error:
            return  # it has exited
        jvm = tree = 0
        for child in children:
            try:
                rss = child.memory_info().rss
                name = child.name()
            except psutil.Error:
                continue
            tree += rss
            if name == "java" and child.ppid() == self._root.pid:
                jvm += rss
        self.peak_python = max(self.peak_python, python)
        self.peak_jvm = max(self.peak_jvm, jvm)
        self.peak_driver = max(self.peak_driver, python + jvm)
        self.peak_tree = max(self.peak_tree, python + tree)


def delete_head(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(60)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    with local_clusters(work / "clusters", heap=args.broker_heap) as bootstraps:
        bootstrap_a, bootstrap_b = bootstraps
        warm_up(bootstrap_a)
        topic = f"bench-audit-{uuid.uuid4()}"
        ferry = Ferry(bootstraps, args.set)
        create_topic(bootstrap_a, topic, args.partitions)
        try:
            began = time.monotonic()
            preload(
                bootstrap_a, topic, args.partitions, args.records, make_values(args.value_bytes)
            )
            fill_seconds = time.monotonic() - began
            print(f"filled {topic}: {args.records:,} records in {fill_seconds:.0f}s", flush=True)
            copy = ferry.start(work / "copy", topic, once=True)
            code = copy.wait(args.timeout)
            if code != 0:
                raise RuntimeError(f"ferry run --once exited {code}:\n{copy.stderr_tail()}")
            copy_seconds = (copy.ended or time.monotonic()) - copy.began
            print(f"copied in {copy_seconds:.0f}s", flush=True)
            delete_head(bootstrap_b, ferry.target(topic), 0, args.delete)
            config = work / "copy" / "ferry.yaml"
            audit = MeasuredProcess(
                ferry_command("audit", "-c", str(config), "--json", "--bucket", "1m"),
                work / "audit",
                env=ferry_env(),
            )
            with DriverMemory(audit.proc.pid) as memory:
                code = audit.wait(args.timeout)
            wall = (audit.ended or time.monotonic()) - audit.began
            if code not in (0, 3):
                raise RuntimeError(f"ferry audit exited {code}:\n{audit.stderr_tail()}")
            document = json.loads((work / "audit.out").read_text())
        finally:
            cleanup_topics(bootstrap_a, [topic])
            ferry.cleanup(topic)
    found = document["flows"]["A->B"]["topics"][topic]
    expected = {"source": args.records, "missing": args.delete, "duplicated": 0, "foreign": 0}
    verdict = {k: found[k] for k in expected}
    mb = 1e6
    return {
        "benchmark": "audit",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "records": args.records,
        "value_bytes": args.value_bytes,
        "partitions": args.partitions,
        "deleted_copies": args.delete,
        "ferry_settings": args.set,
        "fill_seconds": round(fill_seconds, 1),
        "copy_seconds": round(copy_seconds, 1),
        "audit_seconds": round(wall, 1),
        "records_per_second": round(args.records / wall),
        "peak_driver_rss_mb": round(memory.peak_driver / mb),
        "peak_driver_python_rss_mb": round(memory.peak_python / mb),
        "peak_driver_jvm_rss_mb": round(memory.peak_jvm / mb),
        "peak_tree_rss_mb": round(memory.peak_tree / mb),
        "audit_cpu_seconds": round(audit.cpu_seconds, 1),
        "load_before": round(audit.load_before, 2),
        "verdict": verdict,
        "exact": verdict == expected,
        "missing_ranges": found["missing_ranges"],
        "machine": machine_info(local=True),
    }


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    exact = "exactly" if result["exact"] else "WRONG:"
    return (
        f"# ferry audit: {result['records']:,} records x {result['value_bytes']} B, "
        f"{result['partitions']} partitions\n\n"
        f"{result['date']}; {m['cpu_count']} CPUs shared with other engineers' Kafka and Spark "
        f"tests (1-minute load {result['load_before']} as the audit started), Python "
        f"{m['python']}, Kafka {m['kafka']}, pyspark {m['pyspark']}; Spark's default "
        "`local[*]` master and driver memory. The figures are a slow, busy machine's.\n\n"
        "| audit wall s | records/s | peak driver RSS MB (Python + JVM) | of it JVM | "
        "whole tree MB | CPU s | fill s | copy s |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"| {result['audit_seconds']:.1f} | {result['records_per_second']:,} | "
        f"{result['peak_driver_rss_mb']:,} | {result['peak_driver_jvm_rss_mb']:,} | "
        f"{result['peak_tree_rss_mb']:,} | {result['audit_cpu_seconds']:.0f} | "
        f"{result['fill_seconds']:.0f} | {result['copy_seconds']:.0f} |\n\n"
        f"records/s: source records per wall-clock second of the whole `ferry audit` process "
        f"(start-up included; as many copies are read from B). The first "
        f"{result['deleted_copies']:,} copies of remote partition 0 were deleted before the "
        f"audit; it reported {exact} {result['verdict']}.\n"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5_000_000)
    parser.add_argument("--value-bytes", type=int, default=32)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--delete", type=int, default=1000, help="copies deleted from B")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per ferry process, s")
    parser.add_argument("--broker-heap", default="1g")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--keep-temp", action="store_true", help="keep configs and logs")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra ferry config line"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    compile_ferry()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-audit-"))
    try:
        result = run(args, work)
    finally:
        if not args.keep_temp:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "audit.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "audit.md").write_text(markdown(result))
    print(markdown(result))
    if not result["exact"]:
        raise SystemExit(1)


if __name__ == "__main__":
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    main()
