"""How many produce requests each copier's producer sends the target for the same records.

librdkafka builds one ProduceRequest per partition (and, idempotent, keeps one per partition in
flight: bench/producer_in_flight.py); the Java producer MirrorMaker 2 uses puts every ready
partition of a broker into one request, five in flight. At a steady rate over several
partitions the target broker therefore handles more, smaller requests from ferry's producer:
each costs it a network and a request-handler turn, which is what a busy machine makes wait.

One local broker, `--partitions` partitions, `--rate` records/s of `--size` bytes for
`--seconds`, one producer at a time in a process of its own, with ferry's default producer
settings (`ferry.engine.copy.client_settings.producer_settings`): librdkafka as ferry runs it,
the same with a 2 ms linger, and the Java producer with the same settings
(`bench.java_tools.producer_settings`, Kafka's ProducerPerformance at a fixed throughput).
Requests per second: librdkafka's statistics (`brokers[].tx`, the data broker), the Java
producer's `request-total` metric; records per request follows. Latency: send to
acknowledgement (the Java tool's own percentiles).

    .venv/bin/python -m bench.produce_requests [--rate 20000 --partitions 8 --seconds 20]

Results: bench/results/produce-requests.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench import java_tools
from bench.harness import in_own_process, write_report
from bench.stats import median_rows, percentile
from ferry.config.model import ClusterConfig
from ferry.engine.copy.client_settings import producer_settings
from ferry.local.broker import start_broker

RESULTS = Path(__file__).parent / "results"


def _librdkafka(settings: dict[str, str], args: dict[str, Any], out: Any) -> None:
    """One librdkafka producer, records spread round-robin over the partitions."""
    sent_requests = {"tx": 0}

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        sent_requests["tx"] = sum(
            int(b.get("tx", 0)) for b in stats["brokers"].values() if b.get("nodeid", -1) >= 0
        )

    producer = Producer({**settings, "statistics.interval.ms": 100, "stats_cb": on_stats})  # type: ignore[dict-item]
    payload = b"x" * args["size"]
    for p in range(args["partitions"]):  # warm up: metadata, producer id, connection
        producer.produce(args["topic"], payload, partition=p)
    producer.flush(30)
    producer.poll(0.3)
    latencies: list[float] = []
    requests_before = sent_requests["tx"]
    began = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - began < args["seconds"]:
        due = int((now - began) * args["rate"])
        while sent < due:
            stamp = time.monotonic()

            def delivered(err: Any, _msg: Any, stamp: float = stamp) -> None:
                if err is None:
                    latencies.append((time.monotonic() - stamp) * 1000)

            producer.produce(
                args["topic"], payload, partition=sent % args["partitions"], on_delivery=delivered
            )
            sent += 1
        producer.poll(0.001)
    producer.flush(60)
    elapsed = time.monotonic() - began
    producer.poll(0.3)  # one more statistics report
    requests = sent_requests["tx"] - requests_before
    out.put(
        {
            "records": sent,
            "requests_per_s": round(requests / elapsed),
            "records_per_request": round(sent / max(1, requests), 1),
            "p50_ms": round(percentile(sorted(latencies), 0.5), 1),
            "p99_ms": round(percentile(sorted(latencies), 0.99), 1),
        }
    )


_JAVA_PERCENTILES = re.compile(
    r"([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th"
)
_JAVA_REQUESTS = re.compile(
    r"^producer-metrics:request-total:\{client-id=[^}]*\}\s*:\s*([\d.E]+)", re.M
)


def _java(bootstrap: str, args: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Kafka's ProducerPerformance at the rate, with ferry's producer defaults."""
    records = int(args["rate"] * args["seconds"])
    props = [
        f"{k}={v}"
        for k, v in {"bootstrap.servers": bootstrap, **java_tools.producer_settings()}.items()
    ]
    command = java_tools.java_command(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--topic",
            args["topic"],
            "--num-records",
            str(records),
            "--throughput",
            str(args["rate"]),
            "--record-size",
            str(args["size"]),
            "--print-metrics",
            "--producer-props",
            *props,
        ],
        java_tools.write_log_config(directory, "perf"),
    )
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    elapsed = time.monotonic() - began
    percentiles = _JAVA_PERCENTILES.findall(done.stdout)
    total = _JAVA_REQUESTS.findall(done.stdout)
    if not percentiles or not total:
        raise RuntimeError(f"no summary or request-total in:\n{done.stdout[-3000:]}")
    requests = float(total[-1])
    # The tool's run includes the JVM's start; its records went out in `seconds` of that.
    return {
        "records": records,
        "requests_per_s": round(requests / args["seconds"]),
        "records_per_request": round(records / max(1.0, requests), 1),
        "p50_ms": float(percentiles[-1][0]),
        "p99_ms": float(percentiles[-1][2]),
        "wall_s": round(elapsed, 1),
    }


def run(options: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="ferry-bench-requests-"))
    broker = start_broker("B", directory / "B", heap="1g")
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        ferry = producer_settings(ClusterConfig(alias="B", bootstrap_servers=broker.bootstrap))
        variants = {
            "ferry (librdkafka)": ferry,
            "ferry with linger.ms = 2": {**ferry, "linger.ms": "2"},
        }
        for round_ in range(options.repeat):
            for index, name in enumerate([*variants, "Java producer (MirrorMaker 2's)"]):
                topic = f"requests-{round_}-{index}"
                admin.create_topics([NewTopic(topic, options.partitions, 1)])[topic].result(30)
                args = {
                    "topic": topic,
                    "rate": options.rate,
                    "size": options.size,
                    "seconds": options.seconds,
                    "partitions": options.partitions,
                }
                if name in variants:
                    outcome = in_own_process(
                        _librdkafka, (variants[name], args), options.seconds + 120
                    )
                else:
                    outcome = _java(broker.bootstrap, args, directory)
                print(name, outcome, flush=True)
                runs.setdefault(name, []).append(outcome)
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "rate": options.rate,
        "size": options.size,
        "partitions": options.partitions,
        "seconds": options.seconds,
        "runs": runs,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Produce requests per second for the same records",
        "",
        f"One local broker, {report['partitions']} partitions, {report['rate']:,} records/s of "
        f"{report['size']:,} B for {report['seconds']} s, one producer at a time, ferry's "
        "default producer settings (`python -m bench.produce_requests`). Medians over the runs; "
        "each run's figures in the json.",
        "",
        "| producer | requests/s | records per request | p50 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    columns = [
        ("requests_per_s", "{:,.0f}"),
        ("records_per_request", "{:.1f}"),
        ("p50_ms", "{:.1f}"),
        ("p99_ms", "{:.1f}"),
    ]
    return "\n".join([*lines, *median_rows(report["runs"], columns)]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=20000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    options = parser.parse_args()
    report = run(options)
    write_report(options.out, "produce-requests", report, markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
