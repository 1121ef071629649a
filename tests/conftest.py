"""Session fixtures shared by every test tier.

Real clusters start once per session, lazily (a unit-test run starts none), and are reused
with a fresh topic name per test. They are stopped by pid at the end of the session.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Spark and the brokers talk over loopback only; Python workers use this interpreter.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# The test clusters' brokers JIT-compile with C1 only and collect with the serial collector:
# their C2 compiler threads were half of six busy brokers' CPU on this 2-core machine, and a
# broker restarted under that load took minutes to rejoin. What they are tested for (Kafka's
# protocol, leaders, transactions) is the same.
os.environ.setdefault("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
# pytest-xdist's workers (make test) start with COLUMNS=80 and LINES=24 in their environment,
# which ferry's console honours as the terminal's width; a test sees what a single pytest
# process sees, where neither is set.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster

# Property tests draw the same examples on every run, so a suite that passed once passes again
# (CI never meets a new counterexample by chance). HYPOTHESIS_PROFILE=explore draws new ones.
# No deadline per example: on 2 cores shared with six brokers an example's time says nothing
# about the code (one took over 200 ms under a load average of 40).
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


# Fixtures that start real brokers or a real Spark: only integration tests may use them, so
# `pytest -m "not integration"` (make unit) starts neither.
NEEDS_INTEGRATION = frozenset({"kafka_clusters", "spark"})
INTEGRATION_DIRS = ("integration", "chaos", "faults", "package")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration, tests/chaos, tests/faults and tests/package is an
    integration test."""
    for item in items:
        if Path(item.path).parent.name in INTEGRATION_DIRS:
            item.add_marker(pytest.mark.integration)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under `pytest -n 2` (make test) the integration tests are one unit of work: they run
    in order on one worker, which starts the session's clusters and Spark once, while the
    unit tests (many of them waiting on clusters that do not answer) run on the other.
    (xdist's own `xdist_group` marks do not group under pytest 9.2, which keeps node ids
    where xdist no longer rewrites them.)"""
    from xdist.scheduler import LoadScopeScheduling

    prefixes = tuple(f"tests/{name}/" for name in INTEGRATION_DIRS)

    class IntegrationTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "integration" if nodeid.startswith(prefixes) else nodeid

    return IntegrationTogether(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    wanted = NEEDS_INTEGRATION.intersection(getattr(item, "fixturenames", ()))
    if wanted and item.get_closest_marker("integration") is None:
        pytest.fail(
            f"{item.nodeid} uses {', '.join(sorted(wanted))}, which start(s) brokers or Spark; "
            "move it to tests/integration (or mark it integration)",
            pytrace=False,
        )


# Broker settings of the test clusters beyond ferry's local defaults. The log cleaner looks
# for dirty logs every 0.5 s instead of 15 s: tests of compacted topics wait for it.
TEST_BROKER = {"log.cleaner.backoff.ms": "500"}


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Two independent single-node KRaft clusters, A and B, for the whole session."""
    directory = tmp_path_factory.mktemp("kafka")
    brokers = local.up(["A", "B"], directory, {"A": TEST_BROKER, "B": TEST_BROKER})
    try:
        yield brokers
    finally:
        local.down(directory, keep_data=True)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses: clusters are shared across the session."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A small deterministic local Spark: 2 cores, 4 attempts per task, no UI.

    It has Spark's Kafka connector, as `ferry audit`'s session does: `ferry run`, `ferry
    audit` and the engine all run in this process on it (see tests/ferry_cli.py).
    """
    from pyspark.sql import SparkSession

    from ferry.engine.spark.python_workers import default_cache_dir, worker_python
    from ferry.local.spark_kafka import spark_kafka_jars

    # As `ferry run` starts a local Spark (engine/spark/session.py): every Python process Spark
    # starts (more than ten per streaming query: planner, writer, commit and source runners,
    # task workers) loads pyspark compiled, not from Spark's zips, where each one compiled it
    # again (about a second of CPU per process, per query of every test).
    wrapper = worker_python(os.environ["PYSPARK_PYTHON"], default_cache_dir())
    if wrapper is not None:
        os.environ["PYSPARK_PYTHON"] = wrapper
    warehouse: Path = tmp_path_factory.mktemp("spark")
    session = (
        SparkSession.builder.master("local[2,4]")  # a failed task is retried, as by ferry
        .appName("ferry-tests")
        .config("spark.jars", ",".join(str(jar) for jar in spark_kafka_jars()))
        .config("spark.ui.enabled", "false")
        # ferry's settings of a local session (engine/spark/session.py): its task workers'
        # daemon, and checkpoint files renamed in process instead of through a `readlink`
        # and a `chmod` process each (about 150 ms of every micro-batch).
        .config("spark.python.daemon.module", "ferry.engine.spark.python_workers")
        .config(
            "spark.sql.streaming.checkpointFileManagerClass",
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager",
        )
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(warehouse / "warehouse"))
        .config("spark.local.dir", str(warehouse / "tmp"))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()
