"""Lag-aware placement: a skewed backlog against a perfect split of the same records.

Two local clusters; per round, two fresh topics of `--partitions` partitions, preloaded with
the same number of 1 KiB records:

- `skewed`: one partition holds `--skew` times what each other one does;
- `even`: the same total spread evenly, which Spark's bins split perfectly.

Continuous `ferry run` copies each (leases, `ferry.bins` = Spark's cores, the head start off
so Spark's own placement copies everything) while a producer adds `--rate` records/s to the
other partitions. Measured: from the first record on the target until every partition's
preloaded records are there (the backlog at zero), per case. A first round of both cases is
a warm-up and not counted: the first runs after the brokers start are slower, whichever
case they copy (JIT, page cache). The cases alternate in order between rounds, and each
case's topics are deleted after it. If each bin copied at one fixed rate, the hot partition
alone would bound the skewed case at max(hot, total / bins) against total / bins (printed as
that bound); here both bins and both brokers share the machine's cores, so a bin that copies
alone (the hot one, once the others are done) goes faster than one of two, and the skewed
case can come closer than that. Writes bench/results/placement.{json,md} (or `--out`). From
the repository root: `python -m bench.placement [--rounds N]`; `--render JSON` writes the
markdown of an earlier run's JSON again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.engine_once import machine_info
from bench.harness import (
    cleanup_topics,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    warm_up,
)
from bench.replicators import Ferry

TIMEOUT = 600.0
BINS = 2


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-up-rounds", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--cold", type=int, default=40_000, help="records per cold partition")
    parser.add_argument("--skew", type=int, default=10)
    parser.add_argument("--rate", type=float, default=1000.0, help="steady records/s meanwhile")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--render", type=Path, help="only write the markdown of this JSON")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="extra ferry config"
    )
    return parser.parse_args()


def preload(bootstrap: str, topic: str, counts: list[int], values: list[bytes]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 50,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    for partition, count in enumerate(counts):
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, values[i % len(values)], partition=partition)
                    break
                except BufferError:
                    producer.poll(0.1)
    if producer.flush(300) > 0:
        raise RuntimeError(f"preloading {topic} did not finish")


class Steady:
    """`rate` records/s into the partitions other than 0, until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic, self._partitions, self._rate = topic, partitions, rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        sent, began = 0, time.monotonic()
        while not self._stop.wait(0.01):
            due = int((time.monotonic() - began) * self._rate)
            while sent < due:
                self._producer.produce(
                    self._topic, b"s" * 1024, partition=1 + sent % (self._partitions - 1)
                )
                sent += 1
            self._producer.poll(0)

    def __enter__(self) -> Steady:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(30)


def drain_seconds(
    ferry: Ferry, run_dir: Path, bootstraps: tuple[str, str], counts: list[int], rate: float
) -> float:
    """From the first record on the target until every partition holds its preloaded records."""
    source, target = bootstraps
    topic = f"placement-{uuid.uuid4().hex[:8]}"
    create_topic(source, topic, len(counts))
    preload(source, topic, counts, make_values(1024))
    remote = ferry.target(topic)
    reader = Consumer({"bootstrap.servers": target, "group.id": f"bench-{uuid.uuid4().hex}"})

    def held() -> list[int]:
        try:
            return [
                reader.get_watermark_offsets(TopicPartition(remote, p), timeout=10)[1]
                for p in range(len(counts))
            ]
        except Exception:  # the remote topic is not there yet
            return [0] * len(counts)

    with Steady(source, topic, len(counts), rate):
        proc = ferry.start(run_dir / topic, topic, once=False)
        try:
            first = None
            while True:
                proc.sample()
                now_held = held()
                if first is None and sum(now_held) > 0:
                    first = time.monotonic()
                if first is not None and all(h >= c for h, c in zip(now_held, counts, strict=True)):
                    return time.monotonic() - first
                if proc.poll() is not None:
                    raise RuntimeError(f"ferry exited {proc.returncode}:\n{proc.stderr_tail()}")
                if time.monotonic() - proc.began > TIMEOUT:
                    raise TimeoutError(f"backlog not copied in {TIMEOUT:.0f} s: {now_held}")
                time.sleep(0.1)
        finally:
            proc.stop()
            reader.close()
            ferry.cleanup(topic)
            cleanup_topics(source, [topic])


def measure(args: argparse.Namespace) -> int:
    compile_ferry()
    hot = args.cold * args.skew
    skewed = [hot] + [args.cold] * (args.partitions - 1)
    total = sum(skewed)
    even = [
        total // args.partitions + (p < total % args.partitions) for p in range(args.partitions)
    ]
    bound = max(hot, total / BINS) / (total / BINS)
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-placement-"))
    seconds: dict[str, list[float]] = {"skewed": [], "even": []}
    with local_clusters(work / "clusters") as bootstraps:
        for bootstrap in bootstraps:
            warm_up(bootstrap)
        settings = ["ferry.head.start.enabled=false", f"ferry.bins={BINS}", *args.set]
        ferry = Ferry(bootstraps, settings)
        for round_number in range(-args.warm_up_rounds, args.rounds):
            cases = [("skewed", skewed), ("even", even)]
            for name, counts in cases if round_number % 2 == 0 else cases[::-1]:
                s = drain_seconds(
                    ferry, work / f"{name}-{round_number}", bootstraps, counts, args.rate
                )
                label = "warm-up" if round_number < 0 else f"round {round_number + 1}"
                print(f"{label}: {name} backlog copied in {s:.2f} s", flush=True)
                if round_number >= 0:
                    seconds[name].append(round(s, 2))
    ratio = statistics.median(seconds["skewed"]) / statistics.median(seconds["even"])
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(True),
        "partitions": args.partitions,
        "records": total,
        "skewed_counts": skewed,
        "even_counts": even,
        "steady_rate": args.rate,
        "warm_up_rounds": args.warm_up_rounds,
        "bins": BINS,
        "ferry_settings": args.set,
        "seconds": seconds,
        "ratio": round(ratio, 3),
        "bound": round(bound, 3),
        "target": 1.25,
        "holds": ratio <= 1.25,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "placement.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "placement.md").write_text(render(result))
    print(render(result))
    return 0


def render(result: dict[str, Any]) -> str:
    seconds, skewed, even = result["seconds"], result["skewed_counts"], result["even_counts"]
    paired = _per_round(seconds)
    lines = [
        "# Lag-aware placement: a skewed backlog against a perfect split",
        "",
        f"{result['records']:,} x 1 KiB records on {result['partitions']} partitions, "
        f"{result['bins']} bins, {result['steady_rate']:,.0f} records/s of steady traffic "
        f"meanwhile, {len(seconds['skewed'])} rounds after "
        f"{result.get('warm_up_rounds', 0)} warm-up round(s) of both cases, "
        f"{result['date']} ({result['machine']['cpu_count']} CPUs shared with both brokers).",
        "",
        "| backlog | per partition | copied in s (median) | runs |",
        "|---|---|---:|---|",
        f"| skewed | {skewed[0]:,} on one, {skewed[1]:,} on each other | "
        f"{statistics.median(seconds['skewed']):.2f} | {seconds['skewed']} |",
        f"| even (perfect split) | {even[0]:,} | {statistics.median(seconds['even']):.2f} | "
        f"{seconds['even']} |",
        "",
        f"Skewed / even: **{result['ratio']:.2f}** (target <= 1.25), from the first record on "
        "the target until every partition's preloaded records were there; per round "
        f"(skewed / even of the same round): {paired}. If each bin copied at one fixed rate, "
        f"the hot partition alone would bound this at {result['bound']:.2f}; the bins share "
        "the cores with both brokers, so the hot partition copies faster once the other bin "
        "is done.",
        "",
    ]
    for other in result.get("other_runs", []):
        ratios = _per_round(other["seconds"])
        lines += [
            f"Another run, {other['date']}, the same way: skewed {other['seconds']['skewed']}, "
            f"even {other['seconds']['even']}: **{other['ratio']:.2f}**; per round {ratios}.",
            "",
        ]
        paired += ratios
    if result.get("other_runs"):
        lines += [
            f"All {len(paired)} rounds: the median of the per-round ratios is "
            f"**{statistics.median(paired):.2f}**; {sum(r > 1.25 for r in paired)} of them "
            "above 1.25.",
            "",
        ]
    control = result.get("control")
    if control:
        lines += [
            f"Control, {control['date']}: {control['what']}. Skewed {control['seconds']['skewed']}"
            f", even {control['seconds']['even']}: **{control['ratio']:.2f}**.",
            "",
        ]
    return "\n".join(lines)


def _per_round(seconds: dict[str, list[float]]) -> list[float]:
    """Skewed / even of each round (the two cases of a round ran one after the other)."""
    return [round(s / e, 2) for s, e in zip(seconds["skewed"], seconds["even"], strict=False)]


def main() -> int:
    args = parse_args()
    if args.render:
        result = json.loads(args.render.read_text())
        args.render.with_suffix(".md").write_text(render(result))
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
