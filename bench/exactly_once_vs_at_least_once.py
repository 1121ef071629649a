"""Exactly-once against at-least-once: the same preloaded topic copied by `ferry run --once`.

Starts two local clusters, preloads one topic in A (default 400,000 x 1 KiB records with keys,
8 partitions), then runs `ferry run -c CFG --once --json` alternately in each mode, rounds
times (the order swaps each round). Each run copies the whole topic to a fresh remote topic:
the source cluster gets a fresh alias in each run's config (`A1alos` -> `A1alos.bench`), so
nothing is deleted in between and both modes read the very same records.

Reported per mode, medians over the rounds: the copy rate from ferry's own summary (`seconds`:
from just before the streaming query starts to its end, so Spark's start-up is excluded) and
the wall time of the whole command. Writes bench/results/exactly-once.{json,md}.

    .venv/bin/python bench/exactly_once_vs_at_least_once.py [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ferry.local import clusters as local

RESULTS = Path(__file__).resolve().parent / "results"
TOPIC = "bench"
MODES = {"at-least-once": "disabled", "exactly-once": "enabled"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS)
    return parser.parse_args()


def preload(bootstrap: str, partitions: int, records: int, value_bytes: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500_000,
        }
    )
    value = os.urandom(value_bytes // 2).hex().encode()[:value_bytes]
    payload = 0
    for i in range(records):
        key = b"key-%d" % i
        while True:
            try:
                producer.produce(TOPIC, value, key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.1)
        payload += len(key) + len(value)
    if producer.flush(120) != 0:
        raise RuntimeError("preloading the source did not finish")
    return payload


def write_config(path: Path, alias: str, a: str, b: str, mode: str) -> None:
    path.write_text(
        "\n".join(
            [
                "clusters:",
                f"  {alias}: {{bootstrap.servers: '{a}'}}",
                f"  B: {{bootstrap.servers: '{b}'}}",
                f"{alias}->B.enabled: true",
                f"topics: {TOPIC}",
                "replication.factor: 1",
                "offset-syncs.topic.replication.factor: 1",
                "checkpoints.topic.replication.factor: 1",
                "emit.heartbeats.enabled: 'false'",
                "emit.checkpoints.enabled: 'false'",
                f"exactly.once.source.support: {MODES[mode]}",
                f"ferry.state.dir: '{path.parent / 'state'}'",
            ]
        )
        + "\n"
    )


def one_run(work: Path, alias: str, a: str, b: str, mode: str) -> dict[str, Any]:
    run_dir = work / alias
    run_dir.mkdir()
    config = run_dir / "ferry.yaml"
    write_config(config, alias, a, b, mode)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ferry", "run", "-c", str(config), "--once", "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"ferry run ({mode}) exited {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)[f"{alias}->B"]
    return {
        "mode": mode,
        "alias": alias,
        "records": summary["records"],
        "bytes": summary["bytes"],
        "copy_seconds": round(summary["seconds"], 2),
        "wall_seconds": round(wall, 2),
    }


def main() -> int:
    args = parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ferry-bench-eos-") as tmp:
        work = Path(tmp)
        brokers = local.up(["A", "B"], work / "clusters", heap="1g")
        try:
            a, b = brokers["A"].bootstrap, brokers["B"].bootstrap
            payload = preload(a, args.partitions, args.records, args.value_bytes)
            for round_number in range(1, args.rounds + 1):
                order = list(MODES) if round_number % 2 else list(reversed(MODES))
                for mode in order:
                    alias = f"A{round_number}{'eos' if mode == 'exactly-once' else 'alos'}"
                    run = one_run(work, alias, a, b, mode)
                    if run["records"] != args.records:
                        raise RuntimeError(f"{mode} copied {run['records']} of {args.records}")
                    runs.append(run)
                    print(json.dumps(run), flush=True)
        finally:
            local.down(work / "clusters")
    report = summarize(args, payload, runs)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "exactly-once.json").write_text(json.dumps(report, indent=2) + "\n")
    table = markdown(report)
    (args.results / "exactly-once.md").write_text(table)
    print(table)
    return 0


def summarize(args: argparse.Namespace, payload: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    modes: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        copy = statistics.median(r["copy_seconds"] for r in mine)
        wall = statistics.median(r["wall_seconds"] for r in mine)
        modes[mode] = {
            "copy_seconds": copy,
            "wall_seconds": wall,
            "records_per_second": round(args.records / copy),
            "mb_per_second": round(payload / copy / 1e6, 1),
        }
    ratio = (
        modes["exactly-once"]["records_per_second"] / modes["at-least-once"]["records_per_second"]
    )
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "records": args.records,
        "partitions": args.partitions,
        "value_bytes": args.value_bytes,
        "rounds": args.rounds,
        "modes": modes,
        "exactly_once_to_at_least_once": round(ratio, 2),
        "runs": runs,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{report['records']:,} records x {report['value_bytes']} B, {report['partitions']} "
        f"partitions, medians of {report['rounds']} rounds ({report['date']})",
        "",
        "| mode | copy records/s | copy MB/s | copy s | wall s (with Spark start) |",
        "|---|---|---|---|---|",
    ]
    for mode, m in report["modes"].items():
        lines.append(
            f"| {mode} | {m['records_per_second']:,} | {m['mb_per_second']} | "
            f"{m['copy_seconds']} | {m['wall_seconds']} |"
        )
    lines.append("")
    lines.append(f"exactly-once / at-least-once: {report['exactly_once_to_at_least_once']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
