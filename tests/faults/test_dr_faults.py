"""ferry's DR commands under faults, on the session's 3-node clusters (RF 3, min.insync.replicas 2).

`ferry switchover` SIGKILLed right after it recorded its fence, run again (it resumes at the
drain) and SIGKILLed right after it recorded the groups' commits, run again: it resumes at
the reversal and completes. `--rollback` after such a kill gives the flow back, and a later
switchover starts afresh. Both run in one `ferry run` of their own (one Spark start), on flows
of their own: C->D and E->F (A and B under other aliases, so their progress, offset runs and
control records never meet the session's flows or each other), each on a topic of its own.
The session's clusters have no ACL authorizer, so the writers are stopped by hand
(`--writers-stopped`): the fence holds when nothing writes A's topic after the switch, and what
the writers send to B reaches A through the reversed flow.

`ferry failover flow A->B` with one of B's three nodes killed (the coordinator of a group):
every group the flow syncs is committed on B at its exact position, and a group it cannot
move (members active on B) is named with the reason, the exit code saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ferry.config import load_config
from ferry.control.log import ControlLog, recorded_control
from ferry.flows.switchover import SwitchoverRecord
from ferry.kafka.log import quiet
from ferry.local.cluster import LocalCluster
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
    record,
    wait_for,
)
from tests.faults.invariants import Mode, Verdict, check, group_offsets_after_failover

# A switchover test starts its class's `ferry run` (Spark) or finds it warm; the failover test
# restarts a node of B. On a loaded machine either takes minutes; the bound leaves room (the
# session's setup counts against the first test).
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
                    position[msg.partition()] = msg.offset() + 1
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


def ids(acknowledged: dict[int, list[tuple[int, str]]]) -> set[str]:
    return {i for recs in acknowledged.values() for _, i in recs}


def test_flow_failover_with_a_target_node_down(case: FaultCase) -> None:
    """Groups consumed on A; the coordinator of one on B killed; `ferry failover flow A->B`
    commits each on B exactly and names the one it must leave (members active on B)."""
    mode: Mode = "exactly-once"
    # Enough to copy under the fault in both modes and for a group to read 450 records; more
    # would only lengthen the catch-up and the reading after it.
    case.start_traffic(rate=75)
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
            "flow",
            "-c",
            str(case.runs[mode].config),
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
    assert took < 120, f"ferry failover flow took {took:.0f}s with node {down} of B down"

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


# The flows of the switchover tests' `ferry run`, each (source alias, target alias) standing
# for (A, B); the topic of each is `<prefix>-<flow's role>`.
DR_FLOWS = {"C->D": "switchover", "E->F": "rollback"}


@dataclass
class DrRun:
    """One continuous `ferry run` of flows C->D and E->F (DR_FLOWS) and their reversals, with
    its own control topic; each flow copies one topic, created on A before the run starts."""

    directory: Path
    clusters: dict[str, LocalCluster]
    prefix: str = field(default_factory=lambda: f"dr-{uuid.uuid4().hex[:6]}")
    config: Path = field(default_factory=Path)
    process: FerryProcess | None = None

    def topic(self, flow: str) -> str:
        return f"{self.prefix}-{DR_FLOWS[flow]}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        a, b = self.clusters["A"].link_bootstrap, self.clusters["B"].link_bootstrap
        values: dict[str, Any] = {
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
            "api.control.topic": f"ferry-control-{self.prefix}.internal",
        }
        for flow in DR_FLOWS:
            source, target = flow.split("->")
            topic = re.escape(self.topic(flow))
            for name in (flow, f"{target}->{source}"):  # the reversal copies the same topic
                values[f"{name}.topics"] = topic
                values[f"{name}.groups"] = f"{topic}-.*"
        lines = [
            "clusters:",
            *(f"  {alias}: {{bootstrap.servers: '{a}'}}" for alias in ("C", "E")),
            *(f"  {alias}: {{bootstrap.servers: '{b}'}}" for alias in ("D", "F")),
            *(f"{flow}.enabled: true" for flow in DR_FLOWS),
            *(f"{key}: '{value}'" for key, value in values.items()),
        ]
        self.config = self.directory / "ferry.yaml"
        self.config.write_text("\n".join(lines) + "\n")
        create_topics(self.clusters["A"].bootstrap, *(self.topic(f) for f in DR_FLOWS))
        self.process = FerryProcess(self.config, self.directory)
        self.process.start()

    def ensure_running(self) -> None:
        """Started again if an earlier test's fault ended it (its log is kept)."""
        assert self.process is not None
        if not self.process.alive():
            self.process.start()

    def stop(self) -> None:
        if self.process is not None and self.process.alive():
            try:
                self.process.sigterm(120)
            except Exception:
                if self.process.alive():
                    self.process.sigkill()

    def log(self) -> str:
        assert self.process is not None
        path = self.directory / f"ferry-run-{self.process.starts}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def running(self) -> set[str]:
        """The flows the run last said it runs after a control change (none: not changed)."""
        said = re.findall(r"running flows (.+?) from now on", self.log())
        return set(said[-1].split(", ")) if said else set()


@pytest.fixture(scope="class")
def dr_run(fault_dir: Path, fault_clusters: dict[str, LocalCluster]) -> Iterator[DrRun]:
    run = DrRun(fault_dir / "dr-run", fault_clusters)
    try:
        run.start()
        yield run
    finally:
        run.stop()


@dataclass
class DrFlow:
    """One flow of the DrRun (source alias on A, target alias on B) on its topic; group
    `<topic>-g` consumes on A; the writers and readers a test starts, stopped at its end."""

    run: DrRun
    case: FaultCase
    name: str
    writers: Traffic | None = None
    tail: Tail | None = None

    @property
    def source(self) -> str:
        return self.name.split("->")[0]

    @property
    def target(self) -> str:
        return self.name.split("->")[1]

    @property
    def reverse(self) -> str:
        return f"{self.target}->{self.source}"

    @property
    def topic(self) -> str:
        return self.run.topic(self.name)

    @property
    def a(self) -> str:
        return self.case.clusters["A"].bootstrap

    @property
    def b(self) -> str:
        return self.case.clusters["B"].bootstrap

    @property
    def remote(self) -> str:
        return f"{self.source}.{self.topic}"

    @property
    def group(self) -> str:
        return f"{self.topic}-g"

    def start(self) -> None:
        self.tail = Tail(self.b, self.remote).start()

    def stop(self) -> None:
        if self.writers is not None:
            self.writers.stop()
        if self.tail is not None:
            self.tail.stop()

    def await_copied(self, want: set[str], timeout: float = 120) -> None:
        assert self.tail is not None
        tail = self.tail
        wait_for(
            lambda: tail.unseen(want) == 0,
            timeout,
            f"{self.name} copying all {len(want)} records of {self.topic} to B "
            f"({tail.unseen(want)} unseen; ferry run's log ends:\n{self.run.log()[-2000:]})",
            poll=0.5,
        )

    def switchover(self, *extra: str, kill_after: str | None = None) -> Any:
        return ferry(
            "switchover",
            "-c",
            str(self.run.config),
            "--flow",
            self.name,
            "--writers-stopped",
            "--deadline",
            "120",
            "--json",
            *extra,
            kill_after=kill_after,
        )

    def controls(self) -> tuple[bool, bool]:
        """(the flow runs, its reversal runs), as their control records say."""
        config = load_config(self.run.config)
        forward = recorded_control(config, self.source, self.target)
        backward = recorded_control(config, self.target, self.source)
        assert forward is not None and backward is not None
        return forward.runs(True), backward.runs(False)

    def killed_after(self, step: str, resumed_at: str | None = None) -> SwitchoverRecord:
        """The switchover (resuming at `resumed_at`), SIGKILLed right after recording `step`:
        the steps up to it are recorded, the rest not done, and the flow still runs."""
        killed = self.switchover(kill_after=step)
        assert killed.returncode == -signal.SIGKILL, said(killed)
        assert f"fault: SIGKILL after step {step}" in killed.stderr, said(killed)
        if resumed_at is not None:
            resuming = f"resuming the switchover of {self.name} at step {resumed_at}"
            assert resuming in killed.stderr, said(killed)
        switch = self.record()
        assert (switch.state, switch.done) == ("running", STEPS[: STEPS.index(step) + 1]), switch
        assert self.controls() == (True, False), "a switchover killed before reversing reversed"
        return switch

    def record(self) -> SwitchoverRecord:
        config = load_config(self.run.config)
        log = ControlLog(config.clusters[self.target], config.api.control_topic)
        try:
            raw = log.read_switchover(self.name)
        finally:
            log.close()
        assert raw is not None, f"no switchover record of {self.name}"
        return SwitchoverRecord.from_bytes(raw)

    def assert_switched(self, result: Any, resumed_at: str | None) -> dict[str, Any]:
        """The switchover completed, from `resumed_at`, its proof missing nothing; the running
        `ferry run` turned to the reversal."""
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
            lambda: self.reverse in self.run.running() and self.name not in self.run.running(),
            120,
            f"ferry run turning to {self.reverse} (its log ends:\n{self.run.log()[-2000:]})",
            poll=1.0,
        )
        return report

    def assert_fence_holds(self, a_ends: dict[int, int]) -> None:
        """Writers now write B: what they send reaches A through the reversal, and nothing
        writes A's fenced topic (the flow is stopped; the reversal never writes it)."""
        create_topics(self.b, self.topic)
        sent = ids(produce(self.b, self.topic, f"{self.topic}-on-b", 60))
        back = Tail(self.a, f"{self.target}.{self.topic}").start()
        try:
            wait_for(
                lambda: back.unseen(sent) == 0,
                180,
                f"{self.reverse} copying {len(sent)} records written on B back to A as "
                f"{self.target}.{self.topic} ({back.unseen(sent)} unseen; ferry run's log "
                f"ends:\n{self.run.log()[-2000:]})",
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

    def judged(
        self, acknowledged: dict[int, list[tuple[int, str]]], indefinite: set[str]
    ) -> Verdict:
        return check(
            acknowledged,
            (),
            read_copies(self.b, self.remote),
            "exactly-once",
            indefinite=indefinite,
        )


@pytest.fixture
def dr_flow(case: FaultCase, dr_run: DrRun) -> Iterator[Callable[[str], DrFlow]]:
    """A flow of the class's `ferry run`, by name; its writers and readers stopped after."""
    dr_run.ensure_running()
    made: list[DrFlow] = []

    def flow(name: str) -> DrFlow:
        made.append(DrFlow(dr_run, case, name))
        return made[-1]

    try:
        yield flow
    finally:
        for each in made:
            with contextlib.suppress(Exception):
                each.stop()


@dataclass
class Written:
    """What the writers had acknowledged on A, what got no answer, and where the group
    committed (per partition, the next offset to read)."""

    acknowledged: dict[int, list[tuple[int, str]]]
    indefinite: set[str]
    position: dict[int, int]


def copying_with_a_group(flow: DrFlow) -> Written:
    """Writers on A while the flow copies and the group reads on A; then the writers stop (by
    hand: the clusters have no authorizer) and everything they had acknowledged is on B.

    A first batch shows the flow copies (its `ferry run` may still be starting Spark) before
    the writers start, so they write for seconds, not for as long as Spark takes."""
    flow.start()
    first = produce(flow.a, flow.topic, f"{flow.topic}-first", 30)
    flow.await_copied(ids(first), timeout=300)
    writers = flow.writers = Traffic(flow.a, flow.topic, rate=200).start()
    assert flow.tail is not None
    tail = flow.tail
    wait_for(
        lambda: tail.count() >= 180,
        120,
        f"{flow.name} copying 150 records of {flow.topic} while they are written (ferry run's "
        f"log ends:\n{flow.run.log()[-2000:]})",
        poll=0.5,
    )
    # The group stops mid-stream: the writers write on after its commit.
    position = consume_and_commit(flow.a, flow.group, flow.topic, 250)
    writers.stop()
    assert not writers.indefinite, f"{len(writers.indefinite)} writes without an answer"
    acknowledged = merged(first, writers.acknowledged)
    flow.await_copied(ids(acknowledged))
    assert sum(map(len, acknowledged.values())) > 250, "the writers stopped before the group"
    return Written(acknowledged, set(writers.indefinite), position)


@pytest.mark.timeout(900)  # the first starts the `ferry run`: Spark, on a loaded machine
class TestSwitchover:
    """The switchover tests share one `ferry run` (dr_run): one Spark start for both."""

    def test_switchover_killed_after_fence_and_after_groups_resumes_and_completes(
        self, case: FaultCase, dr_flow: Callable[[str], DrFlow]
    ) -> None:
        flow = dr_flow("C->D")
        written = copying_with_a_group(flow)
        a_ends = ends(flow.a, flow.topic)

        fenced = flow.killed_after("fence")
        resumed = flow.killed_after("groups", resumed_at="drain")
        assert resumed.steps[0] == fenced.steps[0], ("the fence done again", fenced, resumed)
        flow.assert_group_exact(written.position)  # committed on B before the kill

        began = time.monotonic()
        flow.assert_switched(flow.switchover(), resumed_at="reverse")
        switched = time.monotonic() - began
        flow.assert_fence_holds(a_ends)
        flow.assert_group_exact(written.position)
        verdict = flow.judged(written.acknowledged, written.indefinite)
        record(case.name, {"exactly-once": verdict}, {"exactly-once": switched}, not_on_source={})
        assert_exact({"exactly-once": verdict})

        again = flow.switchover()
        assert again.returncode == 0, said(again)
        assert json.loads(again.stdout)["sentence"] == f"{flow.name} was switched over already"

    def test_switchover_rolled_back_after_a_kill_copies_on_and_switches_later(
        self, case: FaultCase, dr_flow: Callable[[str], DrFlow]
    ) -> None:
        flow = dr_flow("E->F")
        written = copying_with_a_group(flow)
        flow.killed_after("groups")

        rolled = flow.switchover("--rollback")
        assert rolled.returncode == 0, said(rolled)
        report = json.loads(rolled.stdout)
        assert (report["action"], report["state"]) == ("rollback", "rolled_back"), said(rolled)
        assert flow.controls() == (True, False)
        again = flow.switchover("--rollback")
        refused = f"no switchover of {flow.name} is under way"
        assert again.returncode == 1 and refused in again.stdout, said(again)

        # The flow copies on: the writers write A again, the group reads on past the
        # rolled-back switchover's commits on B; then they stop and a new switchover starts
        # at the fence. (That the fence holds and the reversal copies back, the test above
        # shows: this switchover takes the same steps.)
        later = produce(flow.a, flow.topic, f"{flow.topic}-after-rollback", 150)
        flow.await_copied(ids(later))
        position = {**written.position, **consume_and_commit(flow.a, flow.group, flow.topic, 100)}
        a_ends = ends(flow.a, flow.topic)

        began = time.monotonic()
        flow.assert_switched(flow.switchover(), resumed_at=None)
        switched = time.monotonic() - began
        assert ends(flow.a, flow.topic) == a_ends, f"{flow.topic} on A written after the fence"
        flow.assert_group_exact(position)
        verdict = flow.judged(merged(written.acknowledged, later), written.indefinite)
        record(case.name, {"exactly-once": verdict}, {"exactly-once": switched}, not_on_source={})
        assert_exact({"exactly-once": verdict})
