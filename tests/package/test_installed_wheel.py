"""ferry as a user installs it: the wheel built from this checkout, `pip install`ed into a fresh
virtualenv and run from outside the repository, with an empty cache and a `mvn` first on PATH
that records any call and fails. So nothing comes from the checkout or from Maven: Kafka's jars
for `ferry local up` are downloaded from Maven Central and checked against the lock the wheel
ships, and `ferry run --once` copies with the installed package's own Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.package, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
RECORDS = 500


@dataclass(frozen=True)
class Installed:
    root: Path  # the working directory, outside the repository
    venv: Path
    env: dict[str, str]
    mvn_calls: Path  # written by the fake mvn, if anything calls it

    def ferry(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "ferry"), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _run(*command: str | Path, cwd: Path) -> None:
    result = subprocess.run(
        [str(c) for c in command], cwd=cwd, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"{command}: {result.stdout[-2000:]}{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    wheels = root / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, REPO, cwd=root)
    [wheel] = wheels.glob("ferry-*.whl")
    venv = root / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=root)
    _run(venv / "bin" / "pip", "install", "-q", wheel, cwd=root)
    fake_bin = root / "fake-bin"
    fake_bin.mkdir()
    mvn_calls = root / "mvn-calls"
    (fake_bin / "mvn").write_text(f'#!/bin/sh\necho "$@" >> {mvn_calls}\nexit 97\n')
    (fake_bin / "mvn").chmod(0o755)
    python = str(venv / "bin" / "python")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK_", "PYTHON", "VIRTUAL_ENV", "FERRY_", "SPARK_"))
    }
    env.update(
        PATH=f"{venv / 'bin'}:{fake_bin}:{os.environ['PATH']}",
        XDG_CACHE_HOME=str(root / "cache"),  # empty: every jar is downloaded
        PYSPARK_PYTHON=python,
        PYSPARK_DRIVER_PYTHON=python,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    return Installed(root, venv, env, mvn_calls)


@pytest.fixture(scope="module")
def clusters(installed: Installed) -> Iterator[dict[str, str]]:
    """Clusters A and B started by the installed ferry: {alias: bootstrap}."""
    directory = installed.root / "clusters"
    started = installed.ferry("local", "up", "--dir", str(directory), "--json")
    try:
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-3000:]
        yield json.loads(started.stdout)
    finally:
        installed.ferry("local", "down", "--dir", str(directory))


def test_the_installed_wheel_runs_without_the_repository_or_maven(
    installed: Installed, clusters: dict[str, str]
) -> None:
    version = installed.ferry("--version")
    assert version.returncode == 0 and version.stdout.strip(), version.stderr
    where = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c", "import ferry; print(ferry.__file__)"],
        cwd=installed.root,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(installed.venv)), where.stdout
    kafka_cache = installed.root / "cache" / "ferry"
    assert (next(kafka_cache.glob("kafka-*")) / ".complete").exists()

    topic = "installed-orders"
    admin = AdminClient({"bootstrap.servers": clusters["A"]})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": clusters["A"], "enable.idempotence": True})
    failed: list[str] = []
    for n in range(RECORDS):
        producer.produce(
            topic,
            key=str(n).encode(),
            value=f"record {n}".encode(),
            on_delivery=lambda error, _m: failed.append(str(error)) if error else None,
        )
    assert producer.flush(60) == 0 and failed == [], failed[:3]
    config = installed.root / "ferry.yaml"
    config.write_text(
        "clusters:\n"
        + "".join(f"  {alias}: {{bootstrap.servers: '{b}'}}\n" for alias, b in clusters.items())
        + "A->B.enabled: true\n"
        f"topics: '{topic}'\n"
        "replication.factor: 1\n"
        "offset-syncs.topic.replication.factor: 1\n"
        "checkpoints.topic.replication.factor: 1\n"
        "heartbeats.topic.replication.factor: 1\n"
        f"ferry.state.dir: '{installed.root / 'state'}'\n"
    )
    validated = installed.ferry("validate", "-c", str(config))
    assert validated.returncode == 0, validated.stdout[-2000:] + validated.stderr[-2000:]

    copied = installed.ferry("run", "-c", str(config), "--once", timeout=600)
    assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
    assert _records(clusters["B"], f"A.{topic}") == RECORDS, copied.stdout[-3000:]
    assert not installed.mvn_calls.exists(), installed.mvn_calls.read_text()


def _records(bootstrap: str, topic: str, timeout: float = 60.0) -> int:
    """Distinct keys a read_committed reader of the topic finds, read to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "installed-count",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    keys: set[bytes] = set()
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                continue
            keys.add(message.key())
        return len(keys)
    finally:
        consumer.close()
