"""`ferry doctor` against real brokers: single-broker targets hold one replica of everything.

Its quiet side (no warning on RF 3, min.insync.replicas 2) cannot be shown on one broker;
tests/unit/test_durability.py checks the rules on such metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

from ferry.local.cluster import LocalCluster
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import create_topic
from tests.integration.replication_setup import write_config


def test_doctor_flags_one_replica_and_unclean_election_on_the_target(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    create_topic(b, f"A.{topic_name}", 1, **{"unclean.leader.election.enable": "true"})
    create_topic(b, f"B-only-{topic_name}", 1)  # not ferry's: not judged
    config = write_config(tmp_path, kafka_clusters, topics=topic_name)

    result = run_ferry("doctor", "-c", str(config), "--json", timeout=60)

    # Warnings only (replication runs, weakened): exit 2, the code a deploy gate reads.
    assert result.returncode == 2, result.stdout + result.stderr
    assert json.loads(result.stdout)["errors"] == []
    warnings = json.loads(result.stdout)["warnings"]
    mine = {(w["kind"], w["cluster"]) for w in warnings if w["topic"] == f"A.{topic_name}"}
    assert mine == {("replication-factor", "B"), ("unclean-leader-election", "B")}
    assert not [w for w in warnings if (w["topic"] or "").startswith("B-only")]
    assert all(w["cluster"] == "B" and w["detail"] for w in warnings)

    human = run_ferry("doctor", "-c", str(config), timeout=60)
    assert human.returncode == 2, human.stdout + human.stderr
    assert f"warning: cluster B, topic A.{topic_name}: one replica only" in human.stdout
    assert f"0 error(s), {len(warnings)} warning(s)" in human.stdout
