"""The source losing records ferry has not copied yet, on 3-node clusters under traffic:
records removed (retention, DeleteRecords) while the link to the source is down, and a source
topic deleted and created again under its name. Never a silent gap: the records removed are
counted by `ferry status` exactly, and no record of the old topic passes for one of the new."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.kafka.log import quiet
from tests.faults.harness import (
    PARTITIONS,
    FaultCase,
    Tail,
    Traffic,
    assert_exact,
    create_topics,
    read_copies,
    wait_for,
)
from tests.faults.invariants import Mode, check

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]


def _status_json(case: FaultCase, mode: Mode) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-m", "ferry", "status", "-c", str(case.runs[mode].config), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _lost_in_status(case: FaultCase, mode: Mode) -> dict[int, int]:
    flows = _status_json(case, mode)["flows"]
    lost: dict[int, int] = {}
    for flow in flows.values():  # type: ignore[attr-defined]
        for row in flow["partitions"]:
            if row["topic"] == case.topic(mode):
                lost[row["partition"]] = row["lost"]
    return lost


@pytest.mark.faults_extended
def test_records_removed_before_they_were_copied_are_counted(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    case.link("A", "cut")  # ferry cannot read the source; the producers still write to it
    for traffic in case.traffic.values():
        goal = traffic.acked + 600
        wait_for(lambda t=traffic, g=goal: t.acked >= g, 120, "600 more records on A")
    admin = AdminClient(quiet({"bootstrap.servers": case.clusters["A"].bootstrap}))
    removed: dict[Mode, dict[int, int]] = {}
    for mode in case.runs:
        topic = case.topic(mode)
        ends = case.traffic[mode].ends()
        # Everything but the last 50 records of each partition, as retention would.
        marks = [TopicPartition(topic, p, max(0, ends[p] - 50)) for p in range(PARTITIONS)]
        results = admin.delete_records(marks)
        removed[mode] = {tp.partition: f.result(60).low_watermark for tp, f in results.items()}
    case.link("A", "restore")
    case.healed()
    assert_exact(case.finish(removed=removed))
    for mode in case.runs:
        gone = case.gone[mode]
        assert sum(gone.values()) > 0, f"{mode}: the deletion removed nothing uncopied"
        wait_for(
            lambda m=mode, g=gone: _lost_in_status(case, m) == g,  # type: ignore[misc]
            60,
            f"{mode}: ferry status counting {gone} records removed before copy",
            poll=2.0,
        )


def test_source_topic_deleted_and_created_again(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    first = dict(case.traffic)
    for traffic in first.values():
        traffic.stop()
    for mode, traffic in first.items():
        want = {i for recs in traffic.acknowledged.values() for _, i in recs}
        tail = case.tails[mode]
        wait_for(lambda t=tail, w=want: t.unseen(w) == 0, 180, f"{mode}: first topic copied")
    a = case.clusters["A"].bootstrap
    admin = AdminClient(quiet({"bootstrap.servers": a}))
    topics = [case.topic(m) for m in case.runs]
    for future in admin.delete_topics(topics).values():
        future.result(60)
    wait_for(
        lambda: not set(topics) & set(admin.list_topics(timeout=10).topics),
        120,
        "the source topics deleted",
    )
    create_topics(a, *topics)
    second = {m: Traffic(a, case.topic(m), generation=2).start() for m in case.runs}
    for traffic in second.values():
        wait_for(lambda t=traffic: t.acked >= 600, 120, "the new topic's records")
        traffic.stop()
    case.healed()
    verdicts = {}
    recovery = {}
    for mode in case.runs:
        want = {i for recs in second[mode].acknowledged.values() for _, i in recs}
        tail: Tail = case.tails[mode]
        wait_for(
            lambda t=tail, w=want: t.unseen(w) == 0,
            240,
            f"{mode}: every record of the re-created {case.topic(mode)} copied",
            poll=1.0,
        )
        recovery[mode] = time.monotonic() - (case.healed_at or 0)
        copies = read_copies(case.clusters["B"].bootstrap, case.remote(mode))
        for generation in (first[mode], second[mode]):
            mine = f"-g{generation.generation}-"
            judged = {p: [c for c in cs if mine in c.id] for p, cs in copies.items()}
            verdict = check(
                {p: list(r) for p, r in generation.acknowledged.items()},
                (),
                judged,
                mode,
                indefinite=generation.indefinite,
            )
            assert verdict.ok(), f"generation {generation.generation}: {verdict.describe()}"
            verdicts[mode] = verdict  # the new topic's, the one a stale position would skip
        # Nothing of either topic but their own records, and no copy left out of both.
        assert sum(map(len, copies.values())) >= sum(t.acked for t in (first[mode], second[mode]))
