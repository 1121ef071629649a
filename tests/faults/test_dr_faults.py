"""ferry's DR commands under faults, on the session's 3-node clusters (RF 3, min.insync.replicas 2).

`ferry switchover` SIGKILLed right after a step is recorded (the fence; the groups' commits),
then run again: it resumes at the next step and completes; `--rollback` after such a kill
gives the flow back, and a later switchover starts afresh. Each switchover test runs a flow of
its own, C->D (A and B under other aliases, so its progress, offset runs and control records
never meet the session's flows), with its own `ferry run` and control topic: the reverse
D->C it ends with stops with that run. The session's clusters have no ACL authorizer, so the
writers are stopped by hand (`--writers-stopped`): the fence holds when nothing writes A's
topic after the switch, and what the writers send to B reaches A through the reversed flow.

`ferry failover --flow A->B` with one of B's three nodes killed (the coordinator of a group):
every group the flow syncs is committed on B at its exact position, and a group it cannot
move (members active on B) is named with the reason, the exit code saying so.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ferry.config import load_config
from ferry.control.log import ControlLog, recorded_control
from ferry.flows.switchover import SwitchoverRecord
from ferry.kafka.log import quiet
from tests.chaos.faults import FerryProcess
from tests.faults.harness import (
    PARTITIONS,
    FaultCase,
    Tail,
    Traffic,
    assert_exact,
    coordinator_of,
    create_topics,
    read_copies,
    wait_for,
)
from tests.faults.invariants import Mode, check, group_offsets_after_failover

# Each test takes 2-3 minutes on a quiet machine; the bound leaves room for a loaded one (a
# `ferry run` of its own starts Spark, and the session's setup counts against the first test).
pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]

STEPS = ("fence", "drain", "groups", "reverse")
# `ferry switchover`, SIGKILLed by itself right after it has recorded the step named by
# FERRY_FAULT_KILL_AFTER in the control topic: the moment "after the fence" or "after the
# group commits", exactly, with no race between the test seeing a line and the next step.
KILLED_SWITCHOVER = """
import os, signal, sys
from ferry.control.log import ControlLog
from ferry.flows.switchover import SwitchoverRecord

after = os.environ["FERRY_FAULT_KILL_AFTER"]
write = ControlLog.write_switchover

def write_then_die(self, flow, value):
    write(self, flow, value)
    if after in SwitchoverRecord.from_bytes(value).done:
        sys.stderr.write(f"fault: SIGKILL after step {after}\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)

ControlLog.write_switchover = write_then_die
from ferry.cli import main
main()
"""


def ferry(*args: str, kill_after: str | None = None, timeout: float = 300) -> Any:
    """`ferry ARGS` as an operator runs it (or the self-killing switchover); its result."""
    env = {**os.environ, "COLUMNS": "200"}
    command = [sys.executable, "-m", "ferry", *args]
    if kill_after is not None:
        env["FERRY_FAULT_KILL_AFTER"] = kill_after
        command = [sys.executable, "-c", KILLED_SWITCHOVER, *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def said(result: Any) -> str:
    out, err = result.stdout[-4000:], result.stderr[-4000:]
    return f"exit {result.returncode}\nstdout:\n{out}\nstderr:\n{err}"


def produce(
    bootstrap: str, topic: str, prefix: str, count: int
) -> dict[int, list[tuple[int, str]]]:
    """`count` records with ids `prefix-i`, acks=all; per partition the acknowledged (offset,
    id). Fails if any was not acknowledged (no fault is on while these are written)."""
    acknowledged: dict[int, list[tuple[int, str]]] = {}
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(f"{msg.key()!r}: {err}")
        else:
            acknowledged.setdefault(msg.partition(), []).append((msg.offset(), msg.key().decode()))

    producer = Producer(
        quiet({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    )
    for i in range(count):
        producer.produce(
            topic,
            key=f"{prefix}-{i}".encode(),
            value=b"v" * 100,
            partition=i % PARTITIONS,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(60) == 0, f"{topic}: records not acknowledged within 60s"
    assert not failed, f"{topic}: {failed[:3]}"
    return acknowledged


def consume_and_commit(bootstrap: str, group: str, topic: str, count: int) -> dict[int, int]:
    """A member of `group` reads `count` more records of `topic` and commits where it stopped
    (per partition, the next offset to read); it leaves the group."""
    consumer = Consumer(
        quiet(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
    )
    position: dict[int, int] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        read = 0
        while read < count:
            assert time.monotonic() < deadline, f"group {group} read {read} of {count} records"
            for msg in consumer.consume(min(500, count - read), 1.0):
                if msg.error() is None:
                    position[msg.partition()] = msg.offset() + 1  # type: ignore[index,operator]
                    read += 1
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in position.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()
    return position


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """`group`'s committed offsets on `topic` (partitions without one left out); read without
    joining the group."""
    consumer = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": group}))
    try:
        found = consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=60
        )
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": "fault-ends"}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def merged(*acks: dict[int, list[tuple[int, str]]]) -> dict[int, list[tuple[int, str]]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for ack in acks:
        for p, recs in ack.items():
            out.setdefault(p, []).extend(recs)
    return out


@dataclass
class OwnFlow:
    """Flow C->D (cluster A as C, B as D) on one topic, with its own control topic and its own
    continuous `ferry run`; group `<topic>-g` consumes on C."""

    case: FaultCase
    directory: Path
    topic: str = ""
    config: Path = field(default_factory=Path)
    run: FerryProcess | None = None
    tail: Tail | None = None

    def __post_init__(self) -> None:
        self.topic = f"dr-{self.case.name}"
        self.directory.mkdir(parents=True, exist_ok=True)
        values: dict[str, Any] = {
            "topics": re.escape(self.topic),
            "groups": f"{re.escape(self.topic)}-.*",
            "exactly.once.source.support": "enabled",
            "replication.factor": 3,
            "offset-syncs.topic.replication.factor": 3,
            "checkpoints.topic.replication.factor": 3,
            "heartbeats.topic.replication.factor": 3,
            "emit.heartbeats.enabled": "false",
            "refresh.topics.interval.seconds": 2,
            "refresh.groups.interval.seconds": 2,
            "emit.checkpoints.interval.seconds": 2,
            "ferry.head.start.enabled": "false",
            "ferry.state.dir": self.directory / "state",
            "api.control.topic": f"ferry-control-{self.case.name}.internal",
        }
        clusters = self.case.clusters
        lines = [
            "clusters:",
            f"  C: {{bootstrap.servers: '{clusters['A'].link_bootstrap}'}}",
            f"  D: {{bootstrap.servers: '{clusters['B'].link_bootstrap}'}}",
            "C->D.enabled: true",
            *(f"{key}: '{value}'" for key, value in values.items()),
        ]
        self.config = self.directory / "ferry.yaml"
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def a(self) -> str:
        return self.case.clusters["A"].bootstrap

    @property
    def b(self) -> str:
        return self.case.clusters["B"].bootstrap

    @property
    def remote(self) -> str:
        return f"C.{self.topic}"

    @property
    def group(self) -> str:
        return f"{self.topic}-g"

    def start(self) -> None:
        create_topics(self.a, self.topic)
        self.run = FerryProcess(self.config, self.directory)
        self.run.start()
        self.tail = Tail(self.b, self.remote).start()

    def stop(self) -> None:
        if self.tail is not None:
            self.tail.stop()
        if self.run is not None and self.run.alive():
            try:
                self.run.sigterm(120)
            except Exception:
                if self.run.alive():
                    self.run.sigkill()

    def log(self) -> str:
        assert self.run is not None
        path = self.directory / f"ferry-run-{self.run.starts}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def await_copied(self, ids: set[str], timeout: float = 180) -> None:
        assert self.tail is not None
        tail = self.tail
        wait_for(
            lambda: tail.unseen(ids) == 0,
            timeout,
            f"C->D copying all {len(ids)} records of {self.topic} to B "
            f"({tail.unseen(ids)} unseen; ferry run's log ends:\n{self.log()[-2000:]})",
            poll=0.5,
        )

    def switchover(self, *extra: str, kill_after: str | None = None) -> Any:
        return ferry(
            "switchover",
            "-c",
            str(self.config),
            "--flow",
            "C->D",
            "--writers-stopped",
            "--deadline",
            "120",
            "--json",
            *extra,
            kill_after=kill_after,
        )

    def controls(self) -> tuple[bool, bool]:
        """(C->D runs, D->C runs), as their control records say."""
        config = load_config(self.config)
        forward = recorded_control(config, "C", "D")
        backward = recorded_control(config, "D", "C")
        assert forward is not None and backward is not None
        return forward.runs(True), backward.runs(False)

    def killed_after(self, step: str) -> None:
        """The switchover, SIGKILLed right after recording `step`: the steps up to it are
        recorded, the rest not done, and C->D still runs."""
        killed = self.switchover(kill_after=step)
        assert killed.returncode == -signal.SIGKILL, said(killed)
        assert f"fault: SIGKILL after step {step}" in killed.stderr, said(killed)
        record = self.record()
        assert (record.state, record.done) == ("running", STEPS[: STEPS.index(step) + 1]), record
        assert self.controls() == (True, False), "a switchover killed before reversing reversed"

    def record(self) -> SwitchoverRecord:
        config = load_config(self.config)
        log = ControlLog(config.clusters["D"], config.api.control_topic)
        try:
            raw = log.read_switchover("C->D")
        finally:
            log.close()
        assert raw is not None, "no switchover record of C->D"
        return SwitchoverRecord.from_bytes(raw)

    def assert_switched(self, result: Any, resumed_at: str | None) -> dict[str, Any]:
        """The switchover completed, from `resumed_at`, its proof missing nothing; the running
        `ferry run` turned to D->C."""
        assert result.returncode == 0, said(result)
        report: dict[str, Any] = json.loads(result.stdout)
        assert (report["action"], report["state"], report["resumed_at"]) == (
            "done",
            "done",
            resumed_at,
        ), said(result)
        assert [s["step"] for s in report["steps"]] == list(STEPS), report["steps"]
        assert [(p["topic"], p["missing"], p["duplicates"]) for p in report["proof"]] == [
            (self.topic, 0, 0)
        ], report["proof"]
        assert self.controls() == (False, True)
        wait_for(
            lambda: "running flows D->C from now on" in self.log(),
            120,
            f"ferry run turning to D->C (its log ends:\n{self.log()[-2000:]})",
            poll=1.0,
        )
        return report

    def assert_fence_holds(self, a_ends: dict[int, int]) -> None:
        """Writers now write B: what they send reaches A through D->C, and nothing writes A's
        fenced topic (C->D is stopped; D->C never writes it)."""
        create_topics(self.b, self.topic)
        sent = produce(self.b, self.topic, f"{self.topic}-on-b", 60)
        back = Tail(self.a, f"D.{self.topic}").start()
        try:
            want = {i for recs in sent.values() for _, i in recs}
            wait_for(
                lambda: back.unseen(want) == 0,
                120,
                f"D->C copying {len(want)} records written on B back to A as D.{self.topic} "
                f"({back.unseen(want)} unseen; ferry run's log ends:\n{self.log()[-2000:]})",
                poll=0.5,
            )
        finally:
            back.stop()
        assert ends(self.a, self.topic) == a_ends, f"{self.topic} on A written after the fence"

    def assert_group_exact(self, on_a: dict[int, int]) -> None:
        """The group starts on B where it stopped on A: nothing skipped, nothing read twice."""
        on_b = committed(self.b, self.group, self.remote)
        verdict = group_offsets_after_failover(on_a, on_b, read_copies(self.b, self.remote))
        assert verdict.ok and verdict.re_read == 0 and verdict.partitions == len(on_a), (
            verdict.describe(),
            on_a,
            on_b,
        )


@pytest.fixture
def own_flow(case: FaultCase, tmp_path: Path) -> Iterator[OwnFlow]:
    flow = OwnFlow(case, tmp_path / "c-to-d")
    try:
        yield flow
    finally:
        flow.stop()


def copying_with_a_group(flow: OwnFlow) -> tuple[Traffic, dict[int, int]]:
    """Writers on A while C->D copies and the group reads on A; then the writers stop (by
    hand: the clusters have no authorizer) and everything they had acknowledged is on B."""
    flow.start()
    writers = Traffic(flow.a, flow.topic, rate=200).start()
    assert flow.tail is not None
    tail = flow.tail
    wait_for(
        lambda: tail.count() >= 300,
        240,
        f"C->D copying 300 records of {flow.topic} (ferry run's log ends:\n{flow.log()[-2000:]})",
        poll=1.0,
    )
    position = consume_and_commit(flow.a, flow.group, flow.topic, 400)
    writers.stop()
    assert not writers.indefinite, f"{len(writers.indefinite)} writes without an answer"
    flow.await_copied({i for recs in writers.acknowledged.values() for _, i in recs})
    return writers, position


@pytest.mark.parametrize("step", ["fence", "groups"])
def test_switchover_killed_after_a_step_resumes_and_completes(
    case: FaultCase, own_flow: OwnFlow, step: str
) -> None:
    flow = own_flow
    writers, position = copying_with_a_group(flow)
    a_ends = ends(flow.a, flow.topic)

    flow.killed_after(step)
    if step == "groups":
        flow.assert_group_exact(position)  # committed on B before the kill

    flow.assert_switched(flow.switchover(), resumed_at=STEPS[STEPS.index(step) + 1])
    flow.assert_fence_holds(a_ends)
    flow.assert_group_exact(position)
    verdict = check(
        writers.acknowledged,
        (),
        read_copies(flow.b, flow.remote),
        "exactly-once",
        indefinite=writers.indefinite,
    )
    assert_exact({"exactly-once": verdict})

    again = flow.switchover()
    assert again.returncode == 0, said(again)
    assert json.loads(again.stdout)["sentence"] == "C->D was switched over already"


def test_switchover_rolled_back_after_a_kill_copies_on_and_switches_later(
    case: FaultCase, own_flow: OwnFlow
) -> None:
    flow = own_flow
    writers, position = copying_with_a_group(flow)
    flow.killed_after("groups")

    rolled = flow.switchover("--rollback")
    assert rolled.returncode == 0, said(rolled)
    report = json.loads(rolled.stdout)
    assert (report["action"], report["state"]) == ("rollback", "rolled_back"), said(rolled)
    assert flow.controls() == (True, False)
    again = flow.switchover("--rollback")
    assert again.returncode == 1 and "no switchover of C->D is under way" in again.stdout, said(
        again
    )

    # C->D copies on: the writers write A again, the group reads on past the rolled-back
    # switchover's commits on B; then they stop and a new switchover starts at the fence.
    later = produce(flow.a, flow.topic, f"{flow.topic}-after-rollback", 600)
    flow.await_copied({i for recs in later.values() for _, i in recs}, timeout=120)
    position.update(consume_and_commit(flow.a, flow.group, flow.topic, 300))
    a_ends = ends(flow.a, flow.topic)

    flow.assert_switched(flow.switchover(), resumed_at=None)
    flow.assert_fence_holds(a_ends)
    flow.assert_group_exact(position)
    acknowledged = merged(writers.acknowledged, later)
    verdict = check(
        acknowledged,
        (),
        read_copies(flow.b, flow.remote),
        "exactly-once",
        indefinite=writers.indefinite,
    )
    assert_exact({"exactly-once": verdict})


def test_flow_failover_with_a_target_node_down(case: FaultCase) -> None:
    """Groups consumed on A; the coordinator of one on B killed; `ferry failover --flow A->B`
    commits each on B exactly and names the one it must leave (members active on B)."""
    mode: Mode = "exactly-once"
    case.start_traffic()
    case.await_copies(300)
    a, b = case.clusters["A"].bootstrap, case.clusters["B"].bootstrap
    topic, remote = case.topic(mode), case.remote(mode)
    groups = {f"{topic}-g{i}": count for i, count in ((1, 150), (2, 450), (3, 50))}
    busy = f"{topic}-g3"  # a member on B before it commits on A: nobody may move it
    member = Consumer(
        quiet({"bootstrap.servers": b, "group.id": busy, "enable.auto.commit": False})
    )
    try:
        member.subscribe([remote])
        wait_for(
            lambda: member.consume(10, 0.5) is not None and bool(member.assignment()),
            60,
            f"a member of {busy} on B assigned {remote}",
        )
        positions = {g: consume_and_commit(a, g, topic, n) for g, n in groups.items()}
        # The coordinator of g1 or g2 on B, not the busy group's (its member stays joined).
        coordinators = {
            g: coordinator_of(case.clusters["B"], g, "__consumer_offsets") for g in groups
        }
        down = next(
            (coordinators[g] for g in groups if coordinators[g] != coordinators[busy]),
            next(n for n in (1, 2, 3) if n != coordinators[busy]),
        )
        case.kill("B", down)
        began = time.monotonic()
        result = ferry(
            "failover",
            "-c",
            str(case.runs[mode].config),
            "--flow",
            "A->B",
            "--groups",
            f"{re.escape(topic)}-g.*",
            "--json",
            timeout=240,
        )
        took = time.monotonic() - began
    finally:
        member.close()

    assert result.returncode == 3, said(result)  # some group left where it was
    report = json.loads(result.stdout)
    outcomes = {g["group"]: g for g in report["groups"]}
    assert sorted(outcomes) == sorted(groups), report["groups"]
    for group in groups:
        if group == busy:
            continue
        assert outcomes[group]["status"] in ("moved", "unchanged"), outcomes[group]
    skipped = outcomes[busy]
    assert (skipped["status"], skipped["reason"]) == ("skipped", "active_members"), skipped
    assert "active member(s) on B" in skipped["detail"], skipped
    assert took < 120, f"ferry failover --flow took {took:.0f}s with node {down} of B down"

    case.start("B", down)
    case.healed()
    assert_exact(case.finish())
    copies = read_copies(b, remote)
    for group, on_a in positions.items():
        if group == busy:
            continue
        on_b = committed(b, group, remote)
        verdict = group_offsets_after_failover(on_a, on_b, copies)
        assert verdict.ok and verdict.re_read == 0 and verdict.partitions == len(on_a), (
            group,
            verdict.describe(),
            on_a,
            on_b,
        )
