"""`ferry monitor` against real brokers and the real engine.

With ferry copying steady traffic there is no alert; with ferry stopped while A keeps
receiving records, `ferry_sync_delay_alert` reaches 1 within 4 periods (counted in the
monitor's samples); once ferry resumes and catches up it returns to 0. The monitor runs
in-process (a thread and a port-0 server, scraped over HTTP like Prometheus would); ferry runs
in the test's main thread, because Spark's Python data sources resolve only in the thread
that registered them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from ferry.config import FerryConfig, load_config
from ferry.engine.runner import Runner
from ferry.errors import KafkaUnavailableError
from ferry.http.metrics_server import MetricsServer
from ferry.local.cluster import LocalCluster
from ferry.monitor.sampler import KafkaSampler, OffsetPair
from ferry.monitor.service import MonitorService
from ferry.monitor.sync_delay import DelayKind
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count, wait_for
from tests.integration.replication_setup import run_beside, write_config

PT = 2  # sync.group.offsets.interval.seconds: the monitor's period


class _Monitor:
    """The monitor service in a thread, its HTTP server on a free port, scraped over HTTP."""

    def __init__(self, config: FerryConfig) -> None:
        self.lines: list[str] = []
        self.service = MonitorService(config, log=self._log)
        self.server = MetricsServer(self.service.metrics.registry, self.service.health, port=0)
        self.base = f"http://127.0.0.1:{self.server.port}"
        self.server.start()
        self.thread = threading.Thread(target=self.service.run, daemon=True)
        self.thread.start()

    def _log(self, line: str) -> None:
        self.lines.append(line)
        print(f"{time.strftime('%H:%M:%S')} monitor: {line}", file=sys.stderr)

    def scrape(self, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Samples of metric `name` whose labels include `labels`, keyed by all their labels."""
        with urllib.request.urlopen(f"{self.base}/metrics", timeout=10) as response:
            text = response.read().decode()
        return {
            tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == name and labels.items() <= s.labels.items()
        }

    def alerts(self, topic: str) -> dict[int, float]:
        found = self.scrape("ferry_sync_delay_alert", flow="A->B", kind="latest", topic=topic)
        return {int(dict(labels)["partition"]): value for labels, value in found.items()}

    def count(self, name: str, **labels: str) -> float:
        return sum(self.scrape(name, flow="A->B", **labels).values())

    def healthz(self) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self) -> None:
        self.service.request_stop()
        self.thread.join(30)
        self.server.stop()
        self.service.close()


class _Traffic:
    """Steady records into every partition of a topic on A (~100 records/s) until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._topic, self._partitions = topic, partitions
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.1):  # pacing, not waiting for an outcome
            for _ in range(10):
                self._producer.produce(self._topic, b"tick", partition=n % self._partitions)
                n += 1
            self._producer.poll(0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(30)


def _phase(what: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {what}", file=sys.stderr)  # shown with -s


def test_an_alert_rises_while_ferry_is_stopped_and_clears_once_it_catches_up(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    remote = f"A.{topic_name}"
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, b"seed", (), 0) for i in range(100)])
    path = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{"sync.group.offsets.interval.seconds": PT},
    )
    config = load_config(path)
    monitor = _Monitor(config)
    traffic: list[_Traffic] = []
    try:

        def copying_steadily() -> None:
            wait_for(lambda: record_count(b, remote) == 100, 120, f"{remote} copied")
            _phase("ferry copied the first records")
            traffic.append(_Traffic(a, topic_name, 2))
            judged = monitor.count("ferry_monitor_samples_total") + 5
            # Five more samples: the window then holds only periods with traffic on A.
            wait_for(
                lambda: monitor.count("ferry_monitor_samples_total") >= judged,
                5 * PT + 30,
                "five samples with ferry copying steady traffic",
            )
            assert monitor.count("ferry_sync_delay_alerts_total") == 0, monitor.lines
            assert monitor.alerts(topic_name) == {0: 0, 1: 0}
            assert monitor.healthz() == (200, "ok\n")

        _phase("ferry starting")
        run_beside(Runner(config, spark=spark), copying_steadily)
        _phase("ferry stopped, A still receiving records")
        stopped, at_stop = time.monotonic(), record_count(a, topic_name)
        samples_at_stop = monitor.count("ferry_monitor_samples_total")
        alerted_at: list[float] = []

        def alerted() -> bool:  # the alerts first: the sample count read after can only be later
            if monitor.alerts(topic_name) != {0: 1, 1: 1}:
                return False
            alerted_at.append(monitor.count("ferry_monitor_samples_total"))
            return True

        # Periods, not seconds: on a loaded machine a period can take longer than PT, and the
        # rule promises the alert within 4 of the monitor's own samples after ferry stopped.
        wait_for(alerted, 60, "ferry_sync_delay_alert = 1 for both partitions")
        samples = alerted_at[0] - samples_at_stop
        print(
            f"alert after {time.monotonic() - stopped:.1f}s, {samples:.0f} samples (PT = {PT}s)",
            file=sys.stderr,
        )
        # One more than 4: the sample under way as ferry stopped may not have seen it stop.
        assert samples <= 5, f"the alert took {samples:.0f} samples after ferry stopped"
        assert monitor.count("ferry_sync_delay_alerts_total", kind="latest") == 2
        alert_lines = [line for line in monitor.lines if line.startswith("sync delay: ")]
        assert len(alert_lines) == 2
        for partition, line in enumerate(sorted(alert_lines)):
            assert line.startswith(
                f"sync delay: flow=A->B kind=latest topic={topic_name} partition={partition} "
            )
            numbers = dict(word.split("=", 1) for word in line.split()[2:])
            # B may have taken the last batch in; it grew less in 3 periods than A in one.
            assert int(numbers["b_sub"]) < int(numbers["a_sub"]) and numbers["threshold"] == "0"
        assert monitor.healthz() == (200, "ok\n")
        behind = record_count(a, topic_name)
        assert behind > at_stop, "A kept receiving records while ferry was stopped"

        def catching_up() -> None:
            wait_for(lambda: record_count(b, remote) >= behind, 120, f"{remote} caught up")
            _phase("B caught up")
            wait_for(
                lambda: monitor.alerts(topic_name) == {0: 0, 1: 0},
                60,  # a deadline, not a promise: the window clears within a few periods
                "ferry_sync_delay_alert back to 0 once ferry caught up",
            )
            _phase("alert cleared")

        _phase("ferry starting again")
        run_beside(Runner(config, spark=spark), catching_up)
        _phase("ferry stopped again")

        recoveries = [line for line in monitor.lines if line.startswith("sync delay over")]
        assert len(recoveries) == 2
    finally:
        for t in traffic:
            t.stop()
        monitor.stop()


def _commit(bootstrap: str, group: str, offsets: list[tuple[str, int, int]]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False
        )
    finally:
        consumer.close()


def test_the_sampler_reads_log_ends_and_group_offsets_on_both_clusters(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    remote = f"A.{topic_name}"
    create_topic(a, topic_name, 2)
    create_topic(b, remote, 2)
    produce(a, topic_name, [Rec(0, None, b"v", (), 0)] * 10 + [Rec(1, None, b"v", (), 0)] * 20)
    produce(b, remote, [Rec(0, None, b"v", (), 0) for _ in range(5)])
    group, other = f"{topic_name}-billing", f"{topic_name}-excluded"
    _commit(a, group, [(topic_name, 0, 8), (topic_name, 1, 12)])
    _commit(b, group, [(remote, 0, 3)])
    _commit(a, other, [(topic_name, 0, 1)])
    path = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{
            "sync.group.offsets.enabled": "true",
            "groups": f"{topic_name}-.*",
            "groups.exclude": ".*-excluded",
        },
    )
    config = load_config(path)

    sample = KafkaSampler(config).sample(config.flow("A", "B"))

    latest, consume = DelayKind.LATEST, DelayKind.CONSUME
    assert sample.pairs == (
        OffsetPair(latest, None, topic_name, remote, 0, 10, 5),
        OffsetPair(latest, None, topic_name, remote, 1, 20, 0),
        OffsetPair(consume, group, topic_name, remote, 0, 8, 3),
        OffsetPair(consume, group, topic_name, remote, 1, 12, 0),  # not synced to B yet
    )

    once = run_ferry("monitor", "-c", str(path), "--once", timeout=60)
    assert once.returncode == 0, once.stderr
    assert f"flow A->B latest {topic_name} partition 0: A 10, B 5 ({remote})" in once.stdout
    assert f"flow A->B consume group {group} {topic_name} partition 1: A 12, B 0" in once.stdout


def test_an_unreachable_cluster_is_reported_not_fatal(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_clusters["A"].bootstrap, topic_name, 1)
    path = tmp_path / "ferry.yaml"
    path.write_text(
        f"clusters:\n  A: {{bootstrap.servers: '{kafka_clusters['A'].bootstrap}'}}\n"
        "  B: {bootstrap.servers: '127.0.0.1:1'}\n"
        f"A->B.enabled: true\ntopics: '{topic_name}'\n"
        "sync.group.offsets.interval.seconds: 1\n"
    )
    config = load_config(path)
    lines: list[str] = []

    sampler = KafkaSampler(config, timeout=1)
    service = MonitorService(config, sampler=sampler, log=lines.append)
    service.tick(config.flow("A", "B"))
    service.tick(config.flow("A", "B"))

    assert len(lines) == 1, lines
    assert lines[0].startswith("flow A->B: no sample this period: cluster B (127.0.0.1:1)")
    failures = service.metrics.registry.get_sample_value(
        "ferry_monitor_sample_failures_total", {"flow": "A->B", "cluster": "B"}
    )
    assert failures == 2
    try:
        sampler.sample(config.flow("A", "B"))
        raise AssertionError("expected the unreachable cluster to be reported")
    except KafkaUnavailableError as exc:
        assert exc.cluster == "B"
    service.close()


def test_ferry_monitor_serves_both_endpoints_and_stops_on_sigterm(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic_name, 1)
    produce(a, topic_name, [Rec(0, None, b"v", (), 0) for _ in range(7)])
    path = write_config(
        tmp_path, kafka_clusters, topics=topic_name, **{"sync.group.offsets.interval.seconds": 1}
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferry", "monitor", "-c", str(path), "--metrics-port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("metrics: http://127.0.0.1:"), first
        base = first.split()[1].rsplit("/", 1)[0]

        def has_offset() -> bool:
            with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
                text = response.read().decode()
            want = f'cluster="A",flow="A->B",partition="0",topic="{topic_name}"'
            return f"ferry_monitor_offset{{{want}}} 7.0" in text

        wait_for(has_offset, 30, "A's log end of the topic on /metrics")
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as response:
            assert (response.status, response.read()) == (200, b"ok\n")

        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "monitoring flow A->B every 1s: latest offsets" in err
    assert "stopping" in err
    assert "Traceback" not in err
