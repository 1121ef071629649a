"""`ferry monitor`'s continuous audit against real brokers: a `ferry monitor` process with
`audit.interval.seconds` set, scraped over HTTP, its alerts POSTed to a receiver here.

After a clean `ferry run --once` its gauges say 0 missing and 0 duplicated; then the head of
a remote partition is deleted and two copies are produced into the remote topic again, and
the next rounds report exactly those, alert once (log line and webhook) and keep the same
Spark session (one JVM child throughout). About 3 minutes on a busy machine (the monitor's
own Spark), so behind the `monitor_audit` marker: `make test-monitor-audit`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import (
    RECENT_MS,
    Rec,
    create_topic,
    produce,
    read_offsets,
    wait_for,
)
from tests.integration.replication_setup import run_once, write_config

# Its own Spark starts in the monitor process: slow on a busy machine.
pytestmark = [pytest.mark.monitor_audit, pytest.mark.timeout(900)]

_FERRY = (sys.executable, "-m", "ferry")
INTERVAL = 3  # audit.interval.seconds: records stamped RECENT_MS are in closed buckets


class _Receiver:
    """A webhook receiver on a free port of 127.0.0.1, keeping every JSON body POSTed."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        events = self.events

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                events.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _scrape(base: str, topic: str) -> dict[str, float]:
    """The audit gauges of `topic` and the flow's round counter, by metric name."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("flow") == "A->B" and s.labels.get("topic") in (topic, None):
                found[s.name] = s.value
    return found


def _jvms(pid: int) -> set[int]:
    return {c.pid for c in psutil.Process(pid).children() if c.name() == "java"}


def test_the_monitor_audits_each_round_and_reports_a_loss_within_a_deadline(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, spark: Any, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, partitions=2)
    produce(a, topic_name, [Rec(i % 2, None, b"v", (), RECENT_MS + i) for i in range(40)])
    config = write_config(
        tmp_path, kafka_clusters, topics=topic_name, **{"audit.interval.seconds": INTERVAL}
    )
    run_once(config, spark)
    remote = f"A.{topic_name}"
    copies = read_offsets(b, remote, 2, 40)

    receiver = _Receiver()
    err_path = tmp_path / "monitor.err"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [
                *_FERRY,
                "monitor",
                "-c",
                str(config),
                "--metrics-port",
                "0",
                "--webhook",
                receiver.url,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("metrics: http://127.0.0.1:"), first
        base = first.split()[1].rsplit("/", 1)[0]
        seen: dict[str, float] = {}

        def rounds_done(n: int) -> bool:
            seen.update(_scrape(base, topic_name))
            return seen.get("ferry_audit_rounds_total", 0) >= n

        wait_for(lambda: rounds_done(1), 240, "a first audit round")
        assert seen["ferry_audit_missing_records"] == 0
        assert seen["ferry_audit_duplicated_records"] == 0
        assert seen["ferry_audit_in_flight_records"] == 0
        assert receiver.events == []
        jvms = _jvms(proc.pid)
        assert len(jvms) == 1, jvms  # the audit's Spark session

        produce(b, remote, [rec for offset, rec in copies[1] if offset in (5, 6)])
        admin = AdminClient({"bootstrap.servers": b})  # kept: its futures need it alive
        lost = TopicPartition(remote, 0, 3)
        admin.delete_records([lost])[lost].result(30)  # copies of source 0:0-2 lost
        after = seen["ferry_audit_rounds_total"] + 1  # a round that began after the damage

        wait_for(
            lambda: rounds_done(after + 1) and seen["ferry_audit_missing_records"] == 3,
            120,
            f"3 missing records on the gauge (last scrape: {seen})",
        )
        assert seen["ferry_audit_duplicated_records"] == 2
        wait_for(lambda: bool(receiver.events), 30, "the alert POSTed to the webhook")
        [alert] = receiver.events
        assert (alert["event"], alert["kind"], alert["topic"]) == ("alert", "audit", topic_name)
        # Its `duplicated` is that round's: 0 if it read B's ends before the copies went in.
        assert alert["missing"] == 3
        assert alert["missing_ranges"] == [{"partition": 0, "first": 0, "last": 2, "count": 3}]
        assert _jvms(proc.pid) == jvms  # every round on the one session

        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        receiver.close()
    log = err_path.read_text()
    assert proc.returncode == 0, log[-3000:]
    assert f"auditing flow A->B every {INTERVAL}s" in log
    assert f"audit: records missing: flow=A->B topic={topic_name}" in log
    assert "Traceback" not in log
