"""A topic added over the API stays copied after a restart, with no setting for it: the
change is kept in the control topic on the flow's target cluster.

In process, as test_control_batches.py: the controller is what the API calls, and the
restart is what `ferry run` does at start (`Controller.of(config).restore()` before the
Runner copies), on the session's Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ferry.config import load_config
from ferry.control.controller import Controller
from ferry.control.log import recorded_control, recorded_controls
from ferry.engine.runner import Runner
from ferry.flows.override import FlowControl
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count, wait_for
from tests.integration.replication_setup import run_beside, run_once, write_config


def _records(count: int, tag: str) -> list[Rec]:
    return [Rec(0, None, f"{tag}-{i}".encode(), (), 0) for i in range(count)]


def test_a_topic_added_over_the_api_is_still_copied_after_a_restart(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    base, extra = f"{topic_name}-file", f"{topic_name}-extra"
    create_topic(a, base, 1)
    create_topic(a, extra, 1)
    produce(a, extra, _records(20, "first"))
    control_topic = f"ferry-control-{topic_name}.internal"  # this test's alone, on B
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=base,
            **{
                "api.control.topic": control_topic,
                "ferry.commit.interval.ms": 200,
                "refresh.topics.interval.seconds": 600,  # so a change is the API's doing
            },
        )
    )
    assert config.api.control_cluster is None  # the default: no setting for persistence
    controller = Controller.of(config, print)
    controller.restore()

    def meanwhile() -> None:
        controller.add_topic("A", "B", extra)
        wait_for(lambda: record_count(b, f"A.{extra}") == 20, 90, "the added topic copied")

    try:
        run_beside(Runner(config, spark=spark), meanwhile)
    finally:
        controller.close()
    added = FlowControl().add(extra)
    assert recorded_control(config, "A", "B") == added  # what failover and translate read
    [kept] = recorded_controls(config)
    assert (kept.cluster, kept.topic, kept.changed) == ("B", control_topic, {"A->B": added})

    # The restart: the state dir forgets the change (a new machine), the control topic does not.
    (tmp_path / "state" / "A-to-B" / "control.json").unlink()
    produce(a, extra, _records(15, "while-stopped"))
    notices: list[str] = []
    restarted = Controller.of(config, notices.append)
    assert restarted.restore()["A->B"] == added
    restarted.close()
    assert notices == [f"flow A->B: topics added: {extra}, as recorded in {control_topic} on B"]
    run_once(config, spark)
    assert record_count(b, f"A.{extra}") == 35
