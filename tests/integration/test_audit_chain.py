"""`ferry audit --flow A->C` over a chain A->B->C: end to end by the first hop's origin.

The session's clusters A and B plus a third, C, started for this module. One `ferry run
--once` copies A->B and B->C; then records are added to A and only A->B runs, so they stand
on B but not on C (in flight end to end, not missing); then the B->C position is moved past
some of them without copying them (as if B->C had lost them): those are missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from ferry.offsets.groups import GroupAdmin
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import RECENT_MS, Rec, create_topic, produce, record_count
from tests.integration.replication_setup import run_once, write_config

# A third cluster and three audits of their own: with the other deployments of three and four
# clusters under `make test-topologies`.
pytestmark = [pytest.mark.integration, pytest.mark.topologies]


@pytest.fixture(scope="module")
def cluster_c(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("kafka-c")
    brokers = local.up(["C"], directory)
    try:
        yield brokers["C"]
    finally:
        local.down(directory)


def _audit(config: Path, flow: str) -> dict[str, Any]:
    result = run_ferry("audit", "-c", str(config), "--flow", flow, "--json", timeout=300)
    assert result.returncode in (0, 3), result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_chain_is_audited_end_to_end_with_in_flight_and_missing_told_apart(
    kafka_clusters: dict[str, LocalCluster],
    cluster_c: LocalCluster,
    topic_name: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    clusters = {**kafka_clusters, "C": cluster_c}
    a = clusters["A"].bootstrap
    create_topic(a, topic_name, 2)
    produce(a, topic_name, [Rec(i % 2, None, b"v", (), RECENT_MS + i) for i in range(100)])
    for name in ("both", "first"):
        (tmp_path / name).mkdir()
    both = write_config(
        tmp_path / "both", clusters, flows=("A->B", "B->C"), topics=f".*{topic_name}"
    )
    run_once(both, spark)  # A->B and B->C side by side: B->C may copy only part of it
    run_once(both, spark)  # the rest
    on_c = f"B.A.{topic_name}"
    assert record_count(cluster_c.bootstrap, on_c) == 100

    whole = _audit(both, "A->C")["flows"]["A->B->C"]
    assert (whole["missing"], whole["duplicated"]) == (0, 0), whole
    assert whole["topics"][topic_name]["copied"] == 100, whole

    # 40 more records reach B only.
    produce(a, topic_name, [Rec(i % 2, None, b"v", (), RECENT_MS + i) for i in range(100, 140)])
    first_hop = write_config(tmp_path / "first", clusters, flows=("A->B",), topics=topic_name)
    run_once(first_hop, spark)
    later = _audit(both, "A->B->C")["flows"]["A->B->C"]["topics"][topic_name]
    assert (later["copied"], later["in_flight"], later["missing"]) == (100, 40, 0), later

    # B->C's position (an offset of B's copy, kept as the offset of C's partition in the
    # flow's group) jumps 10 records of partition 0 ahead, copying nothing: they are lost.
    progress = GroupAdmin(load_cluster(both, "C"))
    position = progress.committed("ferry-B-to-C")[(on_c, 0)]
    progress.commit("ferry-B-to-C", {(on_c, 0): position + 10})
    lost = _audit(both, "A->C")["flows"]["A->B->C"]["topics"][topic_name]
    assert (lost["copied"], lost["missing"], lost["in_flight"]) == (100, 10, 30), lost
    # A's partition 0 held offsets 0-69; B->C now claims 0-59 of it, C holds 0-49.
    assert lost["missing_ranges"] == [{"partition": 0, "first": 50, "last": 59, "count": 10}]


def load_cluster(config: Path, alias: str) -> Any:
    from ferry.config import load_config

    return load_config(config).clusters[alias]
