"""Fixtures of the integration tier beyond the session's two Kafka clusters and local Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ferry.local import spark as local_spark
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
