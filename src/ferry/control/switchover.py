"""`ferry switchover --flow A->B`: the steps of ferry.flows.switchover, done on the clusters.

Each step is recorded in the control topic beside A->B's control record (key
`switchover:A->B`, see control/log.py) once it is done, so a run cut short finds where it
stopped. The running `ferry run` takes the last step without a restart: it reads the control
topics every few seconds (service/run.py), stops A->B and starts B->A.

What each step touches:
- fence: DENY WRITE ACLs on A, one per principal holding WRITE or ALL on a fenced topic
  (every topic A->B copies but the heartbeats, which ferry writes), ferry's own principal
  excepted; read back until A lists them all. Before it, the flow's replicated positions are
  the window's start.
- drain: A's ends (read_committed) and the flow's positions until every partition is at lag 0
  and A's ends did not move between two looks; then one pass of topic config sync.
- groups: `ferry failover flow A->B` (ferry.offsets.flow_failover), with A's live offsets.
- reverse: on B, each fenced principal may write the copy of its topic (ALLOW WRITE) and the
  DENYs a fence left there are taken back: this fence's (ACL sync copies DENYs to the remote
  topics) and that of an earlier switchover B->A (its fence of B's writers); then A->B is
  turned off and B->A on in the control state, in that order, so the two never run together.
The proof reads the window's records on A and the copies on B whose origin header names them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import psutil
from confluent_kafka import KafkaError, TopicPartition

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.control.log import ControlLog, control_place
from ferry.control.protection import lift_protection
from ferry.errors import FerryError
from ferry.flows.override import FlowControl
from ferry.flows.switchover import (
    DRAIN,
    FENCE,
    GROUPS,
    REVERSE,
    STEPS,
    TITLES,
    Decision,
    FenceAcl,
    Observed,
    Owner,
    SwitchoverRecord,
    TopicProof,
    decide,
    proof,
    writer_fence,
)
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import kafka_errors
from ferry.kafka.partition_offsets import read_ends
from ferry.kafka.provenance import Origin
from ferry.kafka.topic_acls import NoAuthorizer, TopicAcls, ferry_principal
from ferry.offsets.flow_failover import apply_flow_failover, flow_of, plan_flow_failover
from ferry.offsets.runs_and_checkpoints import RunsStore
from ferry.ops.status import replicated_positions
from ferry.sync.topic_configs import TopicConfigSync

__all__ = ["STOP_AFTER_ENV", "SwitchoverOptions", "SwitchoverReport", "switchover"]

# A switchover stops after recording this step, as if cut there (runbooks rehearse a resume).
STOP_AFTER_ENV = "FERRY_SWITCHOVER_STOP_AFTER"
ORIGIN_HEADER = "ferry.origin"
PROGRESS_EVERY = 5.0  # seconds between the drain's progress lines
# A claim on a switchover lasts the drain's deadline plus this: the other steps (a fence of
# many ACLs, the groups of a large flow) within it. Renewed as each step is recorded.
CLAIM_MARGIN_SECONDS = 600.0
TP = tuple[str, int]
RecordId = tuple[str, str, int, int]  # the first cluster's alias, topic, partition, offset


@dataclass(frozen=True)
class SwitchoverOptions:
    dry_run: bool = False
    writers_stopped: bool = False  # no fence: the writers were stopped by hand
    rollback: bool = False  # take an unfinished switchover's fence back
    deadline: float = 300.0  # seconds the drain waits for lag 0
    timeout: float = 10.0  # each request to a cluster
    force: bool = False  # go on although the record names another process at work on it


@dataclass
class SwitchoverReport:
    flow: str
    action: str  # what was decided: step (then done), done, refuse, rollback, dry_run
    record: SwitchoverRecord | None = None
    resumed_at: str | None = None
    sentence: str = ""
    planned: list[str] = field(default_factory=list)  # steps a dry run would do
    fence: list[FenceAcl] = field(default_factory=list)  # what a dry run would create
    groups: dict[str, Any] | None = None
    proof: list[TopicProof] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.action == "refuse":
            return 1
        if any(p.missing for p in self.proof):
            return 1
        return 0

    def as_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "flow": self.flow,
            "action": self.action,
            "state": record.state if record else None,
            "resumed_at": self.resumed_at,
            "sentence": self.sentence,
            "planned": self.planned,
            "steps": [
                {"step": s, "started": a, "ended": b, "seconds": round(b - a, 3)}
                for s, a, b in (record.steps if record else ())
            ],
            "writers_stopped": record.writers_stopped if record else None,
            "fence": [f.as_json() for f in (record.fence if record else self.fence)],
            "groups": self.groups,
            "proof": [p.as_json() for p in self.proof],
            "notices": self.notices,
            "exit_code": self.exit_code,
        }


class _Switchover:
    def __init__(
        self,
        config: FerryConfig,
        flow: FlowConfig,
        options: SwitchoverOptions,
        say: Callable[[str], None],
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self.flow = flow
        self.reverse = config.flow(flow.target, flow.source)
        self.options = options
        self.say = say
        self.clock = clock
        self.source = config.clusters[flow.source]
        self.target = config.clusters[flow.target]
        self.policy = flow.replication_policy
        timeout = options.timeout
        self.log = ControlLog(config.clusters[control_place(config, flow)[0]], *_topic(config))
        self.reverse_log = ControlLog(
            config.clusters[control_place(config, self.reverse)[0]], *_topic(config)
        )
        self.source_acls = TopicAcls(self.source, timeout)
        self.target_acls = TopicAcls(self.target, timeout)
        self.notices: list[str] = []

    # --- reading ------------------------------------------------------------------------------

    def record(self, log: ControlLog, name: str) -> SwitchoverRecord | None:
        raw = log.read_switchover(name)
        if not raw:
            return None
        try:
            return SwitchoverRecord.from_bytes(raw)
        except ValueError as exc:
            raise FerryError(
                f"the switchover record of {name} in {log.where} is not one ferry wrote: "
                f"{exc}; delete it (a tombstone for key switchover:{name})"
            ) from None

    def controls(self) -> tuple[FlowControl, FlowControl]:
        mine = self.log.read().get(self.flow.name, FlowControl())
        theirs = self.reverse_log.read().get(self.reverse.name, FlowControl())
        return mine, theirs

    def decide(self) -> Decision:
        mine, theirs = self.controls()
        record = self.record(self.log, self.flow.name)
        now = self.clock()
        observed = Observed(
            flow_runs=mine.runs(self.flow.enabled),
            reverse_runs=theirs.runs(self.reverse.enabled),
            authorizer=self.source_acls.has_authorizer(probe=not self.options.dry_run),
            elsewhere=elsewhere(record.owner if record else None, now),
        )
        return decide(
            self.flow.name,
            record,
            observed,
            now=now,
            writers_stopped=self.options.writers_stopped,
            rollback=self.options.rollback,
            force=self.options.force,
        )

    def claim(self) -> Owner:
        """This process as the switchover's owner, until the longest a step may take."""
        until = self.clock() + self.options.deadline + CLAIM_MARGIN_SECONDS
        return Owner(socket.gethostname(), os.getpid(), until)

    def partitions(self) -> dict[str, int]:
        """The fenced topics and their partition counts: what the flow copies, but the
        heartbeats (ferry writes them)."""
        selector = TopicSelector(self.flow, self.policy, self.controls()[0])
        admin = clients.admin_client(self.source.admin_config())
        with kafka_errors(self.source, "list topics"):
            topics = admin.list_topics(timeout=self.options.timeout).topics
        return {
            name: len(md.partitions)
            for name, md in sorted(topics.items())
            if md.error is None
            and selector.accepts(name)
            and not self.policy.is_heartbeats_topic(name)
        }

    def ends(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The source's last stable offsets (read_committed), as `ferry status` reads lag."""
        admin = clients.admin_client(self.source.admin_config())
        return read_ends(self.source, admin, tps, timeout=self.options.timeout)

    # --- the steps ----------------------------------------------------------------------------

    def fence(self, record: SwitchoverRecord) -> dict[str, Any]:
        topics = self.partitions()
        tps = [(t, p) for t, count in topics.items() for p in range(count)]
        start = replicated_positions(self.target, self.flow, tps, self.options.timeout)
        window = tuple((t, p, start.get((t, p), 0), -1) for t, p in tps)
        if record.writers_stopped:
            self.say(f"no fence: the writers of {self.flow.name}'s topics were stopped by hand")
            return {"window": window}
        principal = ferry_principal(self.source)
        if principal is None:
            self.notices.append(
                f"ferry's principal on {self.source.alias} is not in its client settings (SASL "
                "PLAIN or SCRAM name it): no principal is excepted from the fence"
            )
        built = writer_fence(
            self.source_acls.entries(), topics, principal, self.source.alias, ours=record.fence
        )
        if built.refusal is not None:
            raise FerryError(f"{built.refusal} (nothing was changed)")
        # Recorded before they exist: a run killed after creating them finds them its own,
        # and --rollback or the switch back takes them back.
        pending = replace(record, fence=built.acls, writers=built.writers)
        self.log.write_switchover(self.flow.name, pending.to_bytes())
        pairs = [(f.topic, f.principal) for f in built.acls]
        self.source_acls.create(pairs, "DENY")
        self._until(
            lambda: set(pairs) <= self.source_acls.literal_writes("DENY"),
            f"the fence's ACLs listed by {self.source.alias}",
        )
        for f in built.acls:
            self.say(f"fenced: DENY WRITE for {f.principal} on {f.topic} ({self.source.alias})")
        if not built.writers:
            self.say(
                f"no principal but ferry's holds WRITE on {self.flow.name}'s topics on "
                f"{self.source.alias}: nothing to fence (super users are never fenced by ACLs)"
            )
        return {"window": window, "fence": built.acls, "writers": built.writers}

    def drain(self, record: SwitchoverRecord) -> dict[str, Any]:
        tps = [(t, p) for t, p, _s, _e in record.window]
        deadline = self.clock() + self.options.deadline
        said = 0.0
        previous: dict[TP, int] | None = None
        while True:
            ends = self.ends(tps)
            positions = replicated_positions(self.target, self.flow, tps, self.options.timeout)
            lagging = {tp: e - positions.get(tp, 0) for tp, e in ends.items()}
            lagging = {tp: lag for tp, lag in lagging.items() if lag > 0}
            if not lagging and ends == previous:
                break
            previous = ends
            now = self.clock()
            if now >= deadline:
                if lagging:
                    (topic, partition), lag = max(lagging.items(), key=lambda kv: kv[1])
                    behind = (
                        f"{len(lagging)} partition(s) behind, {topic} partition {partition} "
                        f"by {lag}"
                    )
                else:
                    behind = f"caught up, but {self.source.alias}'s ends still move"
                raise FerryError(
                    f"{self.flow.name} did not reach lag 0 within {self.options.deadline:.0f} "
                    f"s ({behind}): is ferry run copying it, and are the writers fenced or "
                    "stopped? Run ferry switchover again to resume, or with --rollback to "
                    "take the fence back"
                )
            if lagging and now - said >= PROGRESS_EVERY:
                said = now
                self.say(
                    f"waiting for {self.flow.name} to catch up: lag {sum(lagging.values())} "
                    f"in {len(lagging)} partition(s), {deadline - now:.0f} s left"
                )
            time.sleep(0.5)
        synced = TopicConfigSync(self.config, self.flow, timeout=self.options.timeout).sync()
        self.notices.extend(synced.skipped)
        self.say(
            f"caught up: lag 0 in {len(tps)} partition(s); topic configs synced "
            f"({synced.checkpoints} setting(s) changed on {self.target.alias})"
        )
        window = tuple((t, p, s, ends[(t, p)]) for t, p, s, _e in record.window)
        return {"window": window}

    def groups(self) -> dict[str, Any]:
        control = self.controls()[0]
        report = plan_flow_failover(
            self.config, self.flow.name, control=control, timeout=self.options.timeout
        )
        report = apply_flow_failover(  # a one-shot command (ferry switchover)
            self.config, report, timeout=self.options.timeout, admin_commits=True
        )
        for g in report.groups:
            self.say(f"group {g.group}: {g.status}: {g.detail}")
        if report.exit_code == 1:
            failed = [g.group for g in report.groups if g.status == "failed"]
            raise FerryError(
                f"{len(failed)} group(s) could not be committed on {self.target.alias} "
                f"({', '.join(failed[:5])}); fix the cause above and run ferry switchover "
                "again to resume"
            )
        return report.as_json()

    def reverse_acls(self, record: SwitchoverRecord) -> None:
        """On the target: the fenced writers may write the copies; the fence's DENYs there
        (copied by ACL sync, or left by a switchover the other way) are taken back."""
        if not record.writers:
            return
        remote = {
            (t, p): (self.policy.remote_topic(self.flow.source, t), p) for t, p in record.writers
        }
        stale = {
            remote[(f.topic, f.principal)] for f in record.fence if (f.topic, f.principal) in remote
        }
        earlier = self.record(self.reverse_log, self.reverse.name)
        if earlier is not None and earlier.state == "done":
            stale |= {(f.topic, f.principal) for f in earlier.fence}
        try:
            present = self.target_acls.literal_writes("DENY")
            self.target_acls.delete(sorted(stale & present), "DENY")
            allowed = self.target_acls.literal_writes("ALLOW")
            grants = sorted(set(remote.values()) - allowed)
            self.target_acls.create(grants, "ALLOW")
        except NoAuthorizer:
            self.say(
                f"cluster {self.target.alias} has no ACL authorizer: its ACLs stay as they are"
            )
            return
        for topic, principal in grants:
            self.say(f"granted: ALLOW WRITE for {principal} on {topic} ({self.target.alias})")
        for topic, principal in sorted(stale & present):
            self.say(f"taken back: DENY WRITE for {principal} on {topic} ({self.target.alias})")

    def reverse_flows(self) -> None:
        """A->B off, then B->A on, each as a control record (None where the file agrees)."""
        mine, theirs = self.controls()
        self.log.write(self.flow.name, mine.enable(False if self.flow.enabled else None))
        # B->A's own remote topics (on A) protected again, should an earlier failover or
        # switchover have lifted it: they are B->A's copies now.
        self.reverse_log.write(
            self.reverse.name, theirs.enable(None if self.reverse.enabled else True).protect()
        )
        self.say(
            f"{self.flow.name} stopped and {self.reverse.name} started in the control state "
            f"({self.log.where}, {self.reverse_log.where}); a running ferry run acts on it "
            "within seconds"
        )

    def rollback(self, record: SwitchoverRecord) -> SwitchoverRecord:
        pairs = [(f.topic, f.principal) for f in record.fence]
        with contextlib.suppress(NoAuthorizer):
            self.source_acls.delete(pairs, "DENY")
        for topic, principal in pairs:
            self.say(f"taken back: DENY WRITE for {principal} on {topic} ({self.source.alias})")
        rolled = record.rolled_back()
        self.log.write_switchover(self.flow.name, rolled.to_bytes())
        self.say(f"switchover of {self.flow.name} rolled back; {self.flow.name} copies on")
        return rolled

    # --- the proof ----------------------------------------------------------------------------

    def proof(self, record: SwitchoverRecord) -> list[TopicProof]:
        runs = RunsStore(
            self.target,
            self.policy.offset_runs_topic(self.flow.source),
            self.flow.source,
            timeout=self.options.timeout,
        ).refresh()
        on_source: dict[TP, set[RecordId]] = {}
        copied: dict[TP, list[RecordId]] = {}
        source_ids = _IdReader(self.source, self.flow.source)
        target_ids = _IdReader(self.target, None)
        try:
            for topic, partition, start, end in record.window:
                if end <= start:
                    continue  # nothing written in the window (writers stopped): nothing to read
                ids = [
                    i
                    for i in source_ids.read(topic, partition, start, end)
                    if i[0] != self.flow.target  # came from the target: the flow skips it
                ]
                on_source[(topic, partition)] = set(ids)
                if not ids:
                    continue
                index = runs.index(topic, partition)
                downstream = index.downstream(start).offset if len(index) else 0
                remote = self.policy.remote_topic(self.flow.source, topic)
                copies = target_ids.read(remote, partition, downstream, None)
                copied[(topic, partition)] = [
                    c for c in copies if c in on_source[(topic, partition)]
                ]
        finally:
            runs.close()
            source_ids.close()
            target_ids.close()
        return proof(record.window, on_source, copied)

    # --- helpers ------------------------------------------------------------------------------

    def _until(self, check: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline:
                raise FerryError(f"gave up waiting for {what} after {seconds:.0f} s")
            time.sleep(0.25)


def _topic(config: FerryConfig) -> tuple[str]:
    return (config.api.control_topic,)


class _IdReader:
    """Records' ids, partition after partition, through one consumer of `cluster` (made on
    the first read: a window of 10,000 partitions is 10,000 reads)."""

    def __init__(self, cluster: ClusterConfig, alias: str | None) -> None:
        self._cluster = cluster
        self._alias = alias
        self._consumer: Any = None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    def read(self, topic: str, partition: int, start: int, end: int | None) -> list[RecordId]:
        """Each record's id from `start` to `end` (None: the end now): its origin header's
        (alias, topic, partition, offset), or, where it has none and the reader's `alias` is
        given, its own place on that cluster. Records without either are left out."""
        cluster = self._cluster
        if self._consumer is None:
            self._consumer = clients.consumer(
                {
                    **cluster.consumer_config(),
                    "group.id": "ferry-switchover-proof",
                    "enable.partition.eof": True,
                }
            )
        consumer = self._consumer
        ids: list[RecordId] = []
        tp = TopicPartition(topic, partition)
        with kafka_errors(cluster, f"read the ends of {topic} partition {partition}"):
            low, high = consumer.get_watermark_offsets(tp, timeout=15)
        stop = high if end is None else min(end, high)
        first = max(start, low)
        if first >= stop:
            return ids
        consumer.assign([TopicPartition(topic, partition, first)])
        try:
            idle = time.monotonic() + 30
            while time.monotonic() < idle:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if (message.topic(), message.partition()) != (topic, partition):
                    continue  # an earlier partition's, fetched before this assignment
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        break
                    raise FerryError(f"cluster {cluster.alias}: reading {topic}: {error}")
                offset = int(message.offset() or 0)
                if offset >= stop:
                    break
                idle = time.monotonic() + 30
                origin = dict(message.headers() or ()).get(ORIGIN_HEADER)
                if isinstance(origin, bytes):
                    o = Origin.from_bytes(origin)
                    ids.append((o.alias, o.topic, o.partition, o.offset))
                elif self._alias is not None:
                    ids.append((self._alias, topic, partition, offset))
                if offset + 1 >= stop:
                    break
        finally:
            consumer.unassign()
        return ids


def switchover(
    config: FerryConfig,
    flow_name: str,
    options: SwitchoverOptions | None = None,
    *,
    say: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> SwitchoverReport:
    """Switch flow `flow_name` over (see the module doc); raises a `FerryError` when a step
    fails (what was done before it stays recorded: run again to resume)."""
    options = options or SwitchoverOptions()
    flow = flow_of(config, flow_name)
    if flow.source in config.read_only_clusters:
        # The fence writes DENY ACLs on the source, and the reverse flow copies into it.
        raise FerryError(
            f"flow {flow.name}: {flow.source} is a read-only source (source.read.only = true), "
            f"and a switchover fences {flow.source}'s writers with ACLs there and then copies "
            f"into it; fail over instead (ferry failover flow {flow.name}), which writes "
            f"only to {flow.target} (nothing was changed)"
        )
    tell = say or (lambda _line: None)
    run = _Switchover(config, flow, options, tell, clock)
    try:
        return _run(run, options, tell)
    finally:
        run.log.close()
        run.reverse_log.close()


def elsewhere(owner: Owner | None, now: float) -> str | None:
    """Who else is at work on a switchover whose record names `owner`: None when nobody
    (no owner, this process, a process of this host that is gone, or a claim run out)."""
    if owner is None or owner.until <= now:
        return None
    if owner.host == socket.gethostname() and (
        owner.pid == os.getpid() or not psutil.pid_exists(owner.pid)
    ):
        return None
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(owner.until))
    return f"pid {owner.pid} on host {owner.host}, its claim running until {until}"


def _run(
    run: _Switchover, options: SwitchoverOptions, say: Callable[[str], None]
) -> SwitchoverReport:
    decision = run.decide()
    name = run.flow.name
    report = SwitchoverReport(name, decision.action, decision.record, sentence=decision.sentence)
    if decision.action == "refuse":
        return report
    if decision.action == "done":
        assert decision.record is not None
        report.proof = run.proof(decision.record)
        report.notices = run.notices
        return report
    record = decision.record
    assert record is not None
    if options.dry_run:
        report.action = "dry_run"
        report.planned = [s for s in STEPS if s not in record.done]
        if decision.action == "rollback":
            report.planned = ["rollback"]
        elif FENCE in report.planned and not record.writers_stopped:
            built = writer_fence(
                run.source_acls.entries(),
                run.partitions(),
                ferry_principal(run.source),
                run.source.alias,
            )
            if built.refusal is not None:
                report.sentence = built.refusal
            report.fence = list(built.acls)
        return report
    if decision.action == "rollback":
        report.record = run.rollback(record)
        return report
    if decision.resumed:
        report.resumed_at = decision.step
        step = decision.step or ""
        say(f"resuming the switchover of {name} at step {step} ({TITLES.get(step, step)})")
    stop_after = os.environ.get(STOP_AFTER_ENV)
    # Claimed with each step recorded (and before the first one a resumed run does): a second
    # `ferry switchover` of the flow meanwhile is refused instead of fencing and committing
    # beside this one. A fresh one is first recorded with its fence (seconds), as before: a
    # record with no step done would skip the checks of a fresh start the next time.
    if record.steps:
        record = replace(record, owner=run.claim())
        run.log.write_switchover(name, record.to_bytes())
    try:
        for number, step in enumerate(STEPS, 1):
            if step in record.done:
                continue
            started = run.clock()
            say(f"step {number}/{len(STEPS)}: {TITLES[step]}")
            changes: dict[str, Any] = {}
            if step == FENCE:
                changes = run.fence(record)
            elif step == DRAIN:
                changes = run.drain(record)
            elif step == GROUPS:
                report.groups = run.groups()
            elif step == REVERSE:
                # The copies on B become the topics the writers use: no longer ferry's alone.
                lift_protection(run.config, run.flow, None, say, timeout=options.timeout)
                run.reverse_acls(record)
                run.reverse_flows()
            owner = None if step == STEPS[-1] else run.claim()
            record = record.after(step, started, run.clock(), owner=owner, **changes)
            run.log.write_switchover(name, record.to_bytes())
            report.record = record
            say(f"step {number}/{len(STEPS)} done in {record.steps[-1][2] - started:.1f} s")
            if stop_after == step and step != STEPS[-1]:
                raise FerryError(
                    f"stopped after step {step}, as {STOP_AFTER_ENV} asks; run ferry "
                    "switchover again to resume"
                )
    except BaseException:
        if record.owner is not None:  # cut short: the claim goes, what was done stays
            with contextlib.suppress(FerryError):
                run.log.write_switchover(name, replace(record, owner=None).to_bytes())
        raise
    report.action = "done"
    report.proof = run.proof(record)
    report.notices = run.notices
    return report
