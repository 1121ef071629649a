"""The replication graph checked over real topics while ferry runs, not only at load.

Identity flows A->B, A->C and C->B, whose patterns pass the check at load: A->B and A->C
copy `T-.*`, C->B copies `.*-eu`, and no example name of one pattern is admitted by the
other. Then A holds `T-eu`, which both patterns admit: A's records would reach B's `T-eu`
twice, straight and through C. ferry must say so once, naming both paths, hold back only
C->B for that topic, and copy everything else: each record of A exactly once on B, and C's
own topic to B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferry.config.loader import load_config
from ferry.engine.runner import Runner
from ferry.kafka.provenance import Origin
from ferry.local.cluster import LocalCluster
from tests.integration.extra_clusters import module_clusters
from tests.integration.kafka_helpers import (
    RECENT_MS,
    Rec,
    create_topic,
    produce,
    read_all,
    record_count,
)
from tests.integration.replication_setup import origin_of, write_config

pytestmark = [pytest.mark.integration, pytest.mark.topologies, pytest.mark.timeout(900)]

cluster_c = module_clusters("C")

A_RECORDS, C_RECORDS = 30, 10


def _origins(bootstrap: str, topic: str, count: int) -> list[str]:
    records = read_all(bootstrap, topic, 2, count)
    return sorted(Origin.from_bytes(origin_of(r)).alias for r in records)


def test_a_topic_that_completes_a_double_route_is_held_back_on_one_hop_only(
    kafka_clusters: dict[str, LocalCluster],
    cluster_c: dict[str, LocalCluster],
    topic_name: str,
    spark: Any,
    tmp_path: Path,
) -> None:
    clusters = {**kafka_clusters, **cluster_c}
    a, b, c = (clusters[x].bootstrap for x in "ABC")
    both, own = f"{topic_name}-eu", f"{topic_name}-audit-eu"
    create_topic(a, both, 2)
    produce(a, both, [Rec(i % 2, None, f"a-{i}".encode(), (), RECENT_MS) for i in range(A_RECORDS)])
    create_topic(c, both, 2)  # where A->C copies it: the double route exists from the start
    create_topic(c, own, 2)
    produce(c, own, [Rec(i % 2, None, f"c-{i}".encode(), (), RECENT_MS) for i in range(C_RECORDS)])
    config = write_config(
        tmp_path,
        clusters,
        flows=("A->B", "A->C", "C->B"),
        topics=f"{topic_name}-.*",
        **{"C->B.topics": ".*-eu", "replication.policy.class": "IdentityReplicationPolicy"},
    )

    for run in range(2):  # the second run finds A's records on C too: still not copied twice
        notices: list[str] = []
        Runner(load_config(config), once=True, spark=spark, on_notice=notices.append).run()
        refused = [n for n in notices if n.startswith("refused: ")]
        assert len(refused) == 1, notices
        assert f"A's topic {both} reaches B's topic {both} twice: A->B, and A->C->B" in refused[0]
        assert f"held back: C->B does not copy {both}; the rest copies on" in refused[0]

        assert record_count(b, both) == A_RECORDS, f"run {run + 1}: copied twice?"
        assert _origins(b, both, A_RECORDS) == ["A"] * A_RECORDS
        assert _origins(c, both, A_RECORDS) == ["A"] * A_RECORDS
        assert record_count(b, own) == C_RECORDS
        assert _origins(b, own, C_RECORDS) == ["C"] * C_RECORDS
