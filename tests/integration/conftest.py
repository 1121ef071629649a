"""Fixtures of the integration tier beyond the session's two Kafka clusters and local Spark."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ferry.local import clusters as local
from ferry.local import spark as local_spark
from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import SASL_ADMIN_CLIENT, SASL_BROKER
from tests.integration.secure_pair import SecurePair, up
from tests.integration.spark_workers import (
    WORKER_CORES,
    WORKER_MEMORY,
    can_unshare,
    hiding_wrapper,
)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_spark.SparkCluster]:
    """A standalone master and two one-core workers that cannot see this virtualenv."""
    if not can_unshare():
        pytest.skip("needs `unshare -m` with mount rights, to hide the virtualenv from workers")
    directory = tmp_path_factory.mktemp("spark-cluster")
    cluster = local_spark.up(
        directory,
        workers=2,
        cores=WORKER_CORES,
        memory=WORKER_MEMORY,
        wrap_worker=hiding_wrapper(directory),
    )
    try:
        yield cluster
    finally:
        assert set(local_spark.down(directory)) == {"master", "worker-1", "worker-2"}
        assert all(p.process() is None for p in cluster.processes)


@pytest.fixture(scope="session")
def secured_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Two SASL/PLAIN clusters with an ACL authorizer, S and T, for the whole session, started
    by `ferry local up` from broker overrides alone (and the client settings that reach them).
    Tests share them with fresh topic names, as they share A and B."""
    directory = tmp_path_factory.mktemp("secured")
    args = ["local", "up", "--clusters", "S,T", "--dir", str(directory), "--json"]
    for key, value in SASL_BROKER.items():
        args += ["--set", f"{key}={value}"]
    for key, value in SASL_ADMIN_CLIENT.items():
        args += ["--client", f"{key}={value}"]
    result = run_ferry(*args)
    assert result.returncode == 0, result.stderr
    bootstraps = json.loads(result.stdout)
    brokers = local.read_state(directory)
    assert {alias: b.bootstrap for alias, b in brokers.items()} == bootstraps
    try:
        yield brokers
    finally:
        assert run_ferry("local", "down", "--dir", str(directory)).returncode == 0


@pytest.fixture(scope="session")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecurePair]:
    """`ferry local up --security sasl_ssl`: A and B over TLS with SCRAM users and ACLs."""
    yield from up(tmp_path_factory, "sasl_ssl")


@pytest.fixture(scope="session")
def mutual_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecurePair]:
    """`ferry local up --security ssl`: A and B with mutual TLS and ACLs."""
    yield from up(tmp_path_factory, "ssl")
