"""Runtime changes while ferry copies, in leases (the default run) and in bounded micro-batches
(`ferry.lease.seconds = 0`, with `make test-api`): the controller (what the API calls) adds a
topic, pauses, resumes and removes it while the Runner copies on the session's Spark; real
brokers, no HTTP (tests/unit covers that layer, test_control_api.py all of it end to end)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferry.config import load_config
from ferry.control.controller import Controller
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import (
    Rec,
    create_topic,
    produce,
    read_all,
    record_count,
    wait_for,
)
from tests.integration.replication_setup import run_beside, write_config


def _records(count: int, tag: str) -> list[Rec]:
    return [Rec(0, None, f"{tag}-{i}".encode(), (), 0) for i in range(count)]


@pytest.mark.parametrize("mode", ["leases", pytest.param("batches", marks=pytest.mark.api)])
def test_a_topic_added_paused_resumed_and_removed_while_ferry_copies(
    kafka_clusters: dict[str, LocalCluster],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
    mode: str,
) -> None:
    leased = mode == "leases"
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    base, extra = f"{topic_name}-file", f"{topic_name}-extra"
    create_topic(a, base, 1)
    create_topic(a, extra, 1)
    produce(a, extra, _records(40, "first"))
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=base,
            **{
                "ferry.lease.seconds": 300 if leased else 0,  # changes act mid-lease
                "ferry.commit.interval.ms": 200,
                "refresh.topics.interval.seconds": 600,  # so a change is the API's doing
            },
        )
    )
    notices: list[str] = []
    controller = Controller(config, notices.append)
    controller.restore()
    flow = FlowState(tmp_path / "state" / "A-to-B")
    remote = f"A.{extra}"

    def copied(topic: str, count: int, what: str) -> None:
        wait_for(lambda: record_count(b, topic) == count, 90, what)

    def meanwhile() -> None:
        produce(a, base, _records(5, "base"))
        copied(f"A.{base}", 5, "the file's topic copied")
        controller.add_topic("A", "B", extra)
        copied(remote, 40, "the added topic copied, no restart, no refresh interval")

        running = flow.stats().get("lease")
        controller.pause("A", "B")
        if leased:  # the running lease ends at its next slice; no other is planned
            wait_for(lambda: flow.stats().get("lease") != running, 60, "the lease ended")
        produced = flow.latest().get(f"{extra}:0")
        produce(a, extra, _records(30, "paused"))
        produce(a, base, _records(5, "base-paused"))
        if leased:  # the driver's lease watch sees the source grow while nothing copies
            wait_for(lambda: flow.partition_lags().get(f"{extra}:0") == 30, 60, "lag 30")
        else:  # nothing plans: the planner's last look at the source stays as it was
            assert flow.latest().get(f"{extra}:0") == produced
        assert record_count(b, remote) == 40
        controller.resume("A", "B")
        copied(remote, 70, "the paused records copied after resume")
        copied(f"A.{base}", 10, "the file's topic caught up")

        controller.remove_topic("A", "B", extra)
        wait_for(lambda: f"{extra}:0" not in flow.latest(), 60, "a plan without the topic")
        produce(a, extra, _records(10, "removed"))
        produce(a, base, _records(5, "marker"))
        copied(f"A.{base}", 15, "the flow still copying")
        assert record_count(b, remote) == 70, "a removed topic was copied"

    run_beside(Runner(config, spark=spark), meanwhile)
    values = [r.value for r in read_all(b, remote, 1, 70)]
    assert values == [f"first-{i}".encode() for i in range(40)] + [
        f"paused-{i}".encode() for i in range(30)
    ]
    assert notices == [
        f"flow A->B: topic {extra} added over the API",
        "flow A->B: paused over the API",
        "flow A->B: resumed over the API",
        f"flow A->B: topic {extra} removed (its copy stays) over the API",
    ]
