"""Start-up: from process start to the first copied record, ferry against MirrorMaker 2.

Two local clusters (`ferry local up`), both warmed up (a first producer id handed out), one
untimed ferry run so the driver JVM's class archive exists (as on a machine that ran ferry
before), then `--rounds` rounds. Each round starts, one after another in an order that
alternates between rounds, on a fresh topic of `--records` 1 KiB records over
`--partitions` partitions:

- `ferry`: continuous `ferry run` with its defaults (the driver's head start copies while
  Spark starts);
- `ferry without head start`: the same with `ferry.head.start.enabled = false`, so the first
  record waits for Spark's first lease (what Spark's start-up costs);
- `mm2`: MirrorMaker 2's `connect-mirror-maker` with its defaults.

Measured: seconds from the process's start to the first record on the target (the target is
polled every 50 ms), and the CPU seconds of the process tree by then. Each process is
stopped once the first record arrived. Writes bench/results/startup.{json,md} (or `--out`)
and prints the table. Run from the repository root: `python -m bench.startup [--rounds N]`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.engine_once import machine_info
from bench.harness import (
    TopicCounter,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    preload,
    warm_up,
)
from bench.replicators import Ferry, MirrorMaker2

FIRST_RECORD_TIMEOUT = 300.0
POLL_SECONDS = 0.05
NO_HEAD_START = "ferry.head.start.enabled=false"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    return parser.parse_args()


def first_record(
    replicator: Any, run_dir: Path, bootstraps: tuple[str, str], records: int, partitions: int
) -> tuple[float, float]:
    """(seconds to the first record on the target, CPU seconds of the tree by then)."""
    source, target = bootstraps
    topic = f"startup-{uuid.uuid4().hex[:8]}"
    create_topic(source, topic, partitions)
    preload(source, topic, partitions, records, make_values(1024))
    counter = TopicCounter(target)
    proc = replicator.start(run_dir / topic, topic, once=False)
    try:
        while True:
            proc.sample()
            if counter.count(replicator.target(topic)) > 0:
                seconds = time.monotonic() - proc.began
                proc.sample(force=True)
                return seconds, proc.cpu_seconds
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{proc.log.name} exited {proc.returncode}:\n{proc.stderr_tail()}"
                )
            if time.monotonic() - proc.began > FIRST_RECORD_TIMEOUT:
                raise TimeoutError(f"no record on the target after {FIRST_RECORD_TIMEOUT:.0f} s")
            time.sleep(POLL_SECONDS)
    finally:
        proc.stop()
        counter.close()
        replicator.cleanup(topic)


def summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    seconds = [s for s, _ in samples]
    return {
        "first_record_seconds": [round(s, 2) for s in seconds],
        "median_seconds": round(statistics.median(seconds), 2),
        "min_seconds": round(min(seconds), 2),
        "max_seconds": round(max(seconds), 2),
        "median_cpu_seconds": round(statistics.median(c for _, c in samples), 2),
    }


def markdown(result: dict[str, Any]) -> str:
    rows = result["replicators"]
    mm2 = rows["mm2"]["median_seconds"]
    lines = [
        "# Start-up: process start to the first copied record",
        "",
        f"{result['rounds']} rounds, {result['records']:,} x 1 KiB records preloaded on "
        f"{result['partitions']} partitions, run {result['date']} ({result['machine']['cpu_count']}"
        " CPUs shared by both brokers and the replicator). Medians; min-max over the rounds.",
        "",
        "| replicator | first record s (median) | min-max s | x MM2 | CPU s by then |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['median_seconds']:.2f} | {row['min_seconds']:.2f}-"
            f"{row['max_seconds']:.2f} | {row['median_seconds'] / mm2:.2f} | "
            f"{row['median_cpu_seconds']:.1f} |"
        )
    lines += [
        "",
        "`ferry`: defaults (the driver copies while Spark starts, until the first leased task "
        "takes over). `ferry without head start`: `ferry.head.start.enabled = false`, the "
        "first record waits for Spark's first lease. `mm2`: MirrorMaker 2's defaults.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    compile_ferry()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-startup-"))
    samples: dict[str, list[tuple[float, float]]] = {
        "ferry": [],
        "ferry without head start": [],
        "mm2": [],
    }
    with local_clusters(work / "clusters") as bootstraps:
        for bootstrap in bootstraps:
            warm_up(bootstrap)
        replicators: dict[str, Any] = {
            "ferry": Ferry(bootstraps),
            "ferry without head start": Ferry(bootstraps, [NO_HEAD_START]),
            "mm2": MirrorMaker2(bootstraps, args.partitions),
        }
        first_record(replicators["ferry"], work / "untimed", bootstraps, 10, 1)
        for round_number in range(args.rounds):
            names = list(replicators)
            if round_number % 2:
                names.reverse()
            for name in names:
                seconds, cpu = first_record(
                    replicators[name],
                    work / name.replace(" ", "-"),
                    bootstraps,
                    args.records,
                    args.partitions,
                )
                samples[name].append((seconds, cpu))
                print(
                    f"round {round_number + 1}: {name}: first record after {seconds:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(local=True),
        "rounds": args.rounds,
        "records": args.records,
        "partitions": args.partitions,
        "replicators": {name: summary(s) for name, s in samples.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (args.out / "startup.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
