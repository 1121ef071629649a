"""Schema id translation's cost on the copy path: the Python loop with and without it.

`python -m bench.schema_translation [--records N] [--rounds R]` starts two local clusters and
an Apicurio Registry beside each (`ferry local up --schema-registry`'s), fills B's registry
with schemas of its own (so ids differ), registers one Avro schema on A and preloads a topic
on A with registry-encoded 1 KiB values (magic byte, A's id, payload), then copies it with
`copy_bin` (python_loop.py) in alternating rounds: bytes unchanged, and with the flow's schema
translator (engine/copy/schemas.py), each into a fresh remote topic on B. Per round: records/s,
the CPU of the loop's thread, and the registry calls the translator made (once per schema).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from bench.copy_loop import thread_cpu
from bench.harness import create_topic, local_clusters, preload
from ferry.config.model import ClusterConfig, FlowConfig
from ferry.engine.copy.client_settings import consumer_settings, producer_settings
from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.schemas import translator_for
from ferry.engine.copy.types import CopyContext, CopyRange
from ferry.local.schema_registry import start_registries, stop_registries

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "body", "type": "bytes"}],
}


def copy_round(
    mode: str, a: str, b: str, urls: dict[str, str], topic: str, partitions: int, records: int
) -> dict[str, Any]:
    remote = f"A.{topic}.{mode}.{uuid.uuid4().hex[:6]}"
    create_topic(b, remote, partitions)
    source = ClusterConfig(alias="A", bootstrap_servers=a)
    target = ClusterConfig(alias="B", bootstrap_servers=b)
    flow = FlowConfig(source="A", target="B")
    translator = None
    if mode == "translated":
        translator = translator_for("A", {"url": urls["A"]}, "B", {"url": urls["B"]})
        before_calls = (translator.stats.lookups, translator.stats.registrations)
    ctx = CopyContext("A", a, "source-id", "B", b, "target-id", translator=translator)
    ranges = [
        CopyRange(topic, p, 0, records // partitions, remote, 67_108_864) for p in range(partitions)
    ]
    consumer = Consumer(consumer_settings(source, flow))
    producer = Producer(producer_settings(target))
    before, began = thread_cpu(), time.monotonic()
    results = copy_bin(consumer, producer, DeliveryTracker(), ranges, ctx)
    seconds, after = time.monotonic() - began, thread_cpu()
    consumer.close()
    copied = sum(r.copied for r in results)
    row: dict[str, Any] = {
        "mode": mode,
        "records": copied,
        "seconds": round(seconds, 3),
        "records_per_second": round(copied / seconds),
        "loop_cpu_s": round(after["loop"] - before["loop"], 2),
        "translated": sum(r.schema_translated for r in results),
    }
    if translator is not None:
        row["registry_calls"] = (
            translator.stats.lookups - before_calls[0],
            translator.stats.registrations - before_calls[1],
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, local_clusters(Path(tmp)) as (a, b):
        registries = start_registries(["A", "B"], Path(tmp))
        try:
            run(args, a, b, {alias: r.url for alias, r in registries.items()})
        finally:
            stop_registries(Path(tmp))


def run(args: argparse.Namespace, a: str, b: str, urls: dict[str, str]) -> None:
    source, target = (
        SchemaRegistryClient({"url": urls["A"]}),
        SchemaRegistryClient({"url": urls["B"]}),
    )
    for n in range(5):  # B's own schemas: A's id names another schema there
        own = {"type": "enum", "name": f"Own{n}", "symbols": ["X"]}
        target.register_schema(f"own-{n}-value", Schema(json.dumps(own), "AVRO"))
    topic = f"schema-bench-{uuid.uuid4().hex[:8]}"
    sid = source.register_schema(f"{topic}-value", Schema(json.dumps(ORDER), "AVRO"))
    header = b"\x00" + sid.to_bytes(4, "big")
    values = [header + bytes([i % 251]) * 1019 for i in range(64)]
    create_topic(a, topic, args.partitions)
    preload(a, topic, args.partitions, args.records, values)
    rounds = []
    modes = ["unchanged", "translated"]
    for i in range(args.rounds):
        for mode in modes if i % 2 == 0 else reversed(modes):
            rounds.append(copy_round(mode, a, b, urls, topic, args.partitions, args.records))
            print(json.dumps(rounds[-1]), flush=True)
    medians = {
        mode: statistics.median(r["records_per_second"] for r in rounds if r["mode"] == mode)
        for mode in modes
    }
    summary = {**medians, "ratio": round(medians["translated"] / medians["unchanged"], 3)}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"rounds": rounds, "medians": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
