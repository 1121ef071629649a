"""What librdkafka's idempotent producer does while its requests are in flight.

ferry's copies go out through librdkafka's idempotent producer (`enable.idempotence = true`,
so that a retried request never duplicates or reorders a partition). librdkafka 2.x limits
what an idempotent producer has in flight per partition by `RD_KAFKA_IDEMP_MAX_INFLIGHT` (5)
less the partition's *messages* in flight (`rktp_msgs_inflight`), not its requests: once a
request carries 5 records or more, the partition sends nothing more until it is answered.
Meanwhile the records that wait are "ready" (past `linger.ms`), so the broker thread's next
wake-up is "now": it goes round without sleeping until the answer comes.

This measures both, with the same producer settings ferry copies with
(`ferry.engine.copy.client_settings.producer_settings`), against the same settings with a
2 ms linger and with idempotence off and `max.in.flight = 5`: one broker reached through a
delay proxy (round trip `--rtt-ms`, so that a request stays in flight long enough to see), one
partition, records of `--size` bytes at `--rate` a second for `--seconds`, each producer in a
process of its own.
Per producer: delivery latency (produce() to its delivery report) p50 / p99, the process's CPU
in the window, and from librdkafka's statistics every 20 ms the most requests it had waiting
for an answer (`brokers[].waitresp_cnt`) and the most records in flight (`msgs_inflight`).

    .venv/bin/python -m bench.producer_in_flight [--rtt-ms 20 --rate 5000 --seconds 15]

Results: bench/results/producer-in-flight.{json,md}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.harness import in_own_process, write_report
from bench.stats import median_rows, percentile
from bench.wan.clusters import wan_overrides
from bench.wan.link import LinkProcess, LinkSpec
from bench.wan.model import Windows
from ferry.config.model import ClusterConfig
from ferry.engine.copy.client_settings import producer_settings
from ferry.local.broker import free_port, start_broker

RESULTS = Path(__file__).parent / "results"
WINDOW = 4 * 1024 * 1024  # the proxy's window each way: far more than the rate needs


def variants(bootstrap: str) -> dict[str, dict[str, str]]:
    """ferry's copy producer; the same with a 2 ms linger; and with idempotence off (5
    requests in flight)."""
    ferry = producer_settings(ClusterConfig(alias="B", bootstrap_servers=bootstrap))
    return {
        "ferry (idempotent)": ferry,
        "ferry with linger.ms = 2": {**ferry, "linger.ms": "2"},
        "idempotence off, 5 in flight": {
            **ferry,
            "enable.idempotence": "false",
            "max.in.flight.requests.per.connection": "5",
        },
    }


def _produce(
    settings: dict[str, str], topic: str, rate: int, size: int, seconds: float, out: Any
) -> None:
    """One producer, paced at `rate` records a second; what it saw goes to `out` (a queue)."""
    peaks = {"waitresp": 0, "inflight": 0}

    def on_stats(text: str) -> None:
        stats = json.loads(text)
        for broker in stats.get("brokers", {}).values():
            if broker.get("nodeid", -1) >= 0:
                peaks["waitresp"] = max(peaks["waitresp"], int(broker.get("waitresp_cnt", 0)))
        for partition in stats.get("topics", {}).get(topic, {}).get("partitions", {}).values():
            peaks["inflight"] = max(peaks["inflight"], int(partition.get("msgs_inflight", 0)))

    producer = Producer(
        {**settings, "statistics.interval.ms": 20, "stats_cb": on_stats}  # type: ignore[dict-item]
    )
    latencies: list[float] = []
    payload = b"x" * size

    def delivered(err: Any, _msg: Any, sent: float) -> None:
        if err is None:
            latencies.append((time.monotonic() - sent) * 1000)

    # warm up: metadata, producer id, connection
    producer.produce(topic, payload)
    producer.flush(30)
    process = psutil.Process()
    cpu = process.cpu_times()
    began = time.monotonic()
    sent = 0
    while (now := time.monotonic()) - began < seconds:
        due = int((now - began) * rate)
        while sent < due:
            stamp = time.monotonic()
            producer.produce(topic, payload, on_delivery=lambda e, m, s=stamp: delivered(e, m, s))
            sent += 1
        producer.poll(0.001)
    producer.flush(60)
    after = process.cpu_times()
    used = (after.user + after.system) - (cpu.user + cpu.system)
    out.put(
        {
            "records": sent,
            "delivered": len(latencies),
            "p50_ms": round(percentile(sorted(latencies), 0.5), 1),
            "p99_ms": round(percentile(sorted(latencies), 0.99), 1),
            "cpu_cores": round(used / (time.monotonic() - began), 2),
            "most_requests_waiting": peaks["waitresp"],
            "most_records_in_flight": peaks["inflight"],
        }
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="ferry-bench-in-flight-"))
    wan, link = free_port(), free_port()
    broker = start_broker("B", directory / "B", wan_overrides(wan, link), heap="1g")
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        topic = "in-flight"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        spec = LinkSpec(args.rtt_ms / 1000, 1e9)
        with LinkProcess(wan, spec, Windows(WINDOW, WINDOW), listen_port=link):
            for _ in range(args.repeat):
                for name, settings in variants(f"127.0.0.1:{link}").items():
                    outcome = in_own_process(
                        _produce,
                        (settings, topic, args.rate, args.size, args.seconds),
                        args.seconds + 120,
                    )
                    print(name, outcome, flush=True)
                    results.setdefault(name, []).append(outcome)
    finally:
        with contextlib.suppress(Exception):
            broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "rtt_ms": args.rtt_ms,
        "rate": args.rate,
        "size": args.size,
        "seconds": args.seconds,
        "runs": results,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# librdkafka's idempotent producer with requests in flight",
        "",
        f"One broker through a {report['rtt_ms']} ms round trip, one partition, "
        f"{report['rate']:,} records/s of {report['size']:,} B for {report['seconds']} s, "
        "one producer process at a time (`python -m bench.producer_in_flight`). "
        "Medians over the runs; each run's figures in the json.",
        "",
        "| producer | p50 ms | p99 ms | CPU (cores) | most requests waiting "
        "| most records in flight |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    columns = [
        ("p50_ms", "{:.1f}"),
        ("p99_ms", "{:.1f}"),
        ("cpu_cores", "{:.2f}"),
        ("most_requests_waiting", "{:.0f}"),
        ("most_records_in_flight", "{:.0f}"),
    ]
    return "\n".join([*lines, *median_rows(report["runs"], columns)]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = run(args)
    write_report(args.out, "producer-in-flight", report, markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
