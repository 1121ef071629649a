"""`ferry run` writes its driver JVM's class archive on a machine's first run; later runs map it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count
from tests.integration.replication_setup import write_config

pytestmark = [pytest.mark.integration, pytest.mark.processes]


def _ferry_once(config: Path, cache: Path) -> tuple[int, str, set[str]]:
    """Run `ferry run --once`; return its exit code, output, and the archives its JVMs mapped."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferry", "run", "-c", str(config), "--once"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    mapped: set[str] = set()
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        mapped |= _mapped_archives(proc.pid)
        time.sleep(0.2)  # sampling the process tree while it runs, not waiting for a condition
    out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    return proc.returncode, out.decode(errors="replace"), mapped


def _mapped_archives(root: int) -> set[str]:
    """Class archives (.jsa) mapped by `root` or any process below it."""
    found: set[str] = set()
    try:
        tree = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return found
    for process in tree:
        try:
            found |= {m.path for m in process.memory_maps(grouped=True) if m.path.endswith(".jsa")}
        except psutil.Error:
            continue  # ended meanwhile
    return found


def test_first_run_writes_the_archive_and_the_next_run_maps_it(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, f"v{i}".encode(), (), 0) for i in range(100)])
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)
    cache = tmp_path / "cache"

    code, out, _ = _ferry_once(config, cache)
    assert code == 0, out
    archives = list((cache / "ferry" / "jvm").iterdir())
    assert len(archives) == 1 and archives[0].suffix == ".jsa", archives  # no temporary left
    written = archives[0].stat().st_ino

    produce(a, topic_name, [Rec(i % 2, None, f"w{i}".encode(), (), 0) for i in range(50)])
    code, out, mapped = _ferry_once(config, cache)
    assert code == 0, out
    assert str(archives[0]) in mapped, f"the second run's JVM did not map {archives[0]}: {mapped}"
    assert archives[0].stat().st_ino == written  # used, not written again
    assert record_count(b, f"A.{topic_name}") == 150
