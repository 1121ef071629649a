"""The copy loop alone, outside Spark: the Python loop against the native one, side by side.

`python -m bench.copy_loop --bootstrap-a A --bootstrap-b B [--records N] [--rounds R]`
preloads one topic on A (1 KiB random values with keys, 8 partitions), then copies it with
`copy_bin` (confluent-kafka, python_loop.py) and `copy_bin_native` (C, native/fastcopy.c) in
alternating rounds, each into a fresh remote topic on B, with ferry's client settings. Per
round: seconds, records/s and the CPU seconds of this process split into the calling thread
(the loop) and librdkafka's threads (fetch, produce, compression). It measures what a Spark
task's copy costs per record without Spark's fixed costs; run it under `perf record -g` to
see where each thread's time goes. Without --bootstrap-a it starts two local clusters.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from bench.harness import create_topic, local_clusters, make_values, preload
from ferry.config.model import ClusterConfig, FlowConfig
from ferry.engine.copy.client_settings import consumer_settings, producer_settings
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.native_loop import NativeCopier, copy_bin_native
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.types import CopyContext, CopyRange


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process so far: the calling thread (the loop), and all the others
    (librdkafka's, including threads that have exited: RUSAGE_SELF keeps their time)."""
    me = resource.getrusage(resource.RUSAGE_THREAD)
    everyone = resource.getrusage(resource.RUSAGE_SELF)
    own = me.ru_utime + me.ru_stime
    return {"loop": own, "librdkafka": everyone.ru_utime + everyone.ru_stime - own}


def copy_round(
    loop: str,
    a: str,
    b: str,
    topic: str,
    partitions: int,
    records: int,
    overrides: dict[str, dict[str, str]],
) -> dict[str, Any]:
    remote = f"A.{topic}.{loop}.{uuid.uuid4().hex[:6]}"
    create_topic(b, remote, partitions)
    source, target = (
        ClusterConfig(alias="A", bootstrap_servers=a),
        ClusterConfig(alias="B", bootstrap_servers=b),
    )
    flow = FlowConfig(source="A", target="B")
    c_settings = {**consumer_settings(source, flow), **overrides["consumer"]}
    p_settings = {**producer_settings(target), **overrides["producer"]}
    ctx = CopyContext("A", a, "source-id", "B", b, "target-id")
    ranges = [
        CopyRange(topic, p, 0, records // partitions, remote, 67_108_864) for p in range(partitions)
    ]
    before, began = thread_cpu(), time.monotonic()
    if loop == "native":
        copier = NativeCopier(c_settings, p_settings)
        results = copy_bin_native(copier, ranges, ctx)
        copier.close()
    else:
        consumer, producer = Consumer(c_settings), Producer(p_settings)
        results = copy_bin(consumer, producer, DeliveryTracker(), ranges, ctx)
        consumer.close()
    seconds, after = time.monotonic() - began, thread_cpu()
    copied = sum(r.copied for r in results)
    cpu = {k: after[k] - before[k] for k in after}
    return {
        "loop": loop,
        "records": copied,
        "seconds": round(seconds, 3),
        "records_per_second": round(copied / seconds),
        "loop_cpu_s": round(cpu["loop"], 2),
        "librdkafka_cpu_s": round(cpu["librdkafka"], 2),
        "us_per_record": round(sum(cpu.values()) / copied * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-a")
    parser.add_argument("--bootstrap-b")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--loops", default="python,native")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--topic", help="copy this topic of A (its records spread evenly), instead of preloading"
    )
    for role in ("consumer", "producer"):
        parser.add_argument(
            f"--{role}",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"a librdkafka setting of the copy {role} over ferry's default (repeatable)",
        )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.bootstrap_a:
            run(args, args.bootstrap_a, args.bootstrap_b)
        else:
            with local_clusters(Path(tmp)) as (a, b):
                run(args, a, b)


def run(args: argparse.Namespace, a: str, b: str) -> None:
    topic = args.topic or f"copy-loop-{uuid.uuid4().hex[:8]}"
    if not args.topic:
        create_topic(a, topic, args.partitions)
        preload(a, topic, args.partitions, args.records, make_values(1024))
        print(json.dumps({"preloaded": topic}), flush=True)
    rounds = []
    loops = args.loops.split(",")
    overrides = {
        role: dict(item.split("=", 1) for item in getattr(args, role))
        for role in ("consumer", "producer")
    }
    for i in range(args.rounds):
        for loop in loops if i % 2 == 0 else reversed(loops):
            rounds.append(copy_round(loop, a, b, topic, args.partitions, args.records, overrides))
            print(json.dumps(rounds[-1]), flush=True)
    summary = {
        loop: {
            key: statistics.median(r[key] for r in rounds if r["loop"] == loop)
            for key in ("records_per_second", "loop_cpu_s", "librdkafka_cpu_s", "us_per_record")
        }
        for loop in loops
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"rounds": rounds, "medians": summary}, indent=1))


if __name__ == "__main__":
    main()
