"""`ferry failover flow A->B`: every consumer group a flow syncs, moved to its target at once.

The groups are those the flow's group filter takes (`groups` minus `groups.exclude`, as its
checkpoints do; ferry's own progress groups never), narrowed by a regex when one is given:
listed on the source, and found in the target's checkpoints. When the source answers each
group is planned from its live offsets there; when it does not, every group is planned from
its checkpoints in the target. Either way each group is planned exactly as `ferry failover
--group` plans it (`ferry.offsets.failover.plan_failover`, the offset runs read once).

What to do with a planned group is decided here, from the plan alone (`decide`, pure):
- skipped, no position: nothing committed on the source, no checkpoint, nothing replicated;
- unchanged: the target already holds every translated offset, or is further in a partition
  (the group consumed there since a failover; moving it back would deliver records again);
- skipped, active members: the target's group has members and some offset would move;
- otherwise the partitions that are behind the translated offset move to it.
So a second run finds every group where the first left it: unchanged, nothing committed.

Time: whether the source answers is decided once, before any group (`_listed`: a source whose
every broker refuses the connection is given up after a second, one that does not answer at
all after `timeout`); the checkpoints and offset runs are read once, and with the source
answering, which partitions each group committed in there (its `__consumer_offsets`,
kafka/offsets_log.py: each group is then asked for those alone, not every partition); then up to
`CONCURRENT_GROUPS` groups are planned side by side (each group's state and offsets on the
target are requests of their own, one group each, as Kafka's APIs take them), and as many
committed side by side. The report keeps the groups in name order whatever order they
finished in. `FlowFailover.timings`: seconds per phase (not in the JSON).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from confluent_kafka import KafkaError

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import ConfigError, FerryError, KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.kafka.errors import kafka_errors
from ferry.kafka.offsets_log_reader import OffsetsLogIndex
from ferry.offsets import recovery_point
from ferry.offsets.failover import (
    FailoverPlan,
    FlowCheckpoints,
    NoPositionError,
    apply_failover,
    plan_failover,
)
from ferry.offsets.groups import GroupAdmin, group_filter
from ferry.offsets.recovery_point import RecoveryPoint
from ferry.offsets.runs_and_checkpoints import FlowRunsStores
from ferry.offsets.translation import Position

__all__ = [
    "EXIT_SKIPPED",
    "FlowFailover",
    "GroupOutcome",
    "Move",
    "apply_flow_failover",
    "decide",
    "flow_of",
    "groups_pattern",
    "parse_flow",
    "plan_flow_failover",
    "select_groups",
]

log = logging.getLogger(__name__)
CONCURRENT_GROUPS = 16  # groups planned, or committed, side by side
PROBE_SECONDS = 1.0  # a source refusing every connection this long is taken for lost
EXIT_SKIPPED = 3  # every group looked at, some left where they were (reasons in the report)

MOVED, TO_MOVE, UNCHANGED, SKIPPED, FAILED = "moved", "to_move", "unchanged", "skipped", "failed"


@dataclass(frozen=True)
class Move:
    """One partition of a group: where it is on the target now and where it goes."""

    position: Position
    previous: int | None  # the group's offset on the target before; None: none

    @property
    def action(self) -> str:
        """ "move"; "at": the target holds the offset; "ahead": it is further (left alone)."""
        if self.previous == self.position.offset:
            return "at"
        if self.previous is not None and self.previous > self.position.offset:
            return "ahead"
        return "move"

    def as_json(self) -> dict[str, Any]:
        return {**self.position.as_json(), "previous": self.previous, "action": self.action}


@dataclass(frozen=True)
class GroupOutcome:
    group: str
    status: str  # moved, to_move (dry run), unchanged, skipped, failed
    reason: str | None = None  # skipped: "active_members" or "no_position"
    detail: str = ""  # a sentence: why, or what was done
    moves: tuple[Move, ...] = ()
    not_replicated: tuple[tuple[str, int, int], ...] = ()
    notices: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "status": self.status,
            "reason": self.reason,
            "detail": self.detail,
            "partitions": [m.as_json() for m in self.moves],
            "not_replicated": [
                {"topic": t, "partition": p, "committed": o} for t, p, o in self.not_replicated
            ],
            "notices": list(self.notices),
        }


@dataclass
class FlowFailover:
    """The report: one outcome per group, and the flow's recovery point."""

    flow: str
    source: str  # "cluster": live offsets on the flow's source; "checkpoints": the target's
    dry_run: bool
    groups: list[GroupOutcome] = field(default_factory=list)
    recovery: RecoveryPoint | None = None
    notices: list[str] = field(default_factory=list)
    plans: dict[str, FailoverPlan] = field(default_factory=dict, repr=False)
    timings: dict[str, float] = field(default_factory=dict, repr=False)  # seconds per phase

    def count(self, status: str) -> int:
        return sum(g.status == status for g in self.groups)

    @property
    def exit_code(self) -> int:
        """0: every group moved (or would) or was already there; EXIT_SKIPPED: some were left
        where they were; 1: some failed."""
        if self.count(FAILED):
            return 1
        return EXIT_SKIPPED if self.count(SKIPPED) else 0

    def as_json(self) -> dict[str, Any]:
        source, target = self.flow.split("->", 1)
        statuses = (MOVED, TO_MOVE, UNCHANGED, SKIPPED, FAILED)
        return {
            "flow": self.flow,
            "from": source,
            "to": target,
            "source": self.source,
            "dry_run": self.dry_run,
            "summary": {s: self.count(s) for s in statuses},
            "exit_code": self.exit_code,
            "recovery_point": self.recovery.as_json() if self.recovery else None,
            "groups": [g.as_json() for g in self.groups],
            "notices": self.notices,
        }


def parse_flow(text: str) -> tuple[str, str]:
    """`A->B` as (source, target)."""
    source, arrow, target = text.partition("->")
    if not arrow or not source.strip() or not target.strip() or "->" in target:
        raise ConfigError(f"--flow {text}: name one flow as SOURCE->TARGET, like A->B")
    return source.strip(), target.strip()


def select_groups(
    listed: Iterable[str],
    accepts: Callable[[str], bool],
    pattern: re.Pattern[str] | None,
    own: frozenset[str],
) -> list[str]:
    """The groups to move: taken by the flow's filter (`accepts`) and by `pattern` (whole
    name), never one of ferry's own progress groups (`own`)."""
    return sorted(
        {
            g
            for g in listed
            if accepts(g) and g not in own and (pattern is None or pattern.fullmatch(g))
        }
    )


def decide(plan: FailoverPlan) -> GroupOutcome:
    """What to do with a planned group (see the module doc); reads nothing."""
    moves = tuple(Move(p, plan.previous.get((p.target_topic, p.partition))) for p in plan.positions)

    def outcome(status: str, reason: str | None, detail: str) -> GroupOutcome:
        left = tuple(plan.not_replicated)
        return GroupOutcome(plan.group, status, reason, detail, moves, left, tuple(plan.notices))

    if not moves:
        return outcome(
            SKIPPED,
            "no_position",
            f"none of its partitions on {plan.from_alias} has been replicated to {plan.to_alias}",
        )
    if all(m.action != "move" for m in moves):
        detail = f"{plan.to_alias} already holds this position"
        if any(m.action == "ahead" for m in moves):
            detail += " or is further (consumed there since; not moved back)"
        return outcome(UNCHANGED, None, detail)
    members = plan.target_state.members
    if members:
        return outcome(
            SKIPPED,
            "active_members",
            f"{len(members)} active member(s) on {plan.to_alias} ({', '.join(members[:5])}); "
            "stop those consumers and run again (nothing was changed)",
        )
    moving = sum(m.action == "move" for m in moves)
    return outcome(TO_MOVE, None, f"{moving} partition(s) to move on {plan.to_alias}")


def no_position(group: str, error: NoPositionError) -> GroupOutcome:
    return GroupOutcome(group, SKIPPED, "no_position", str(error))


def failed(group: str, error: FerryError) -> GroupOutcome:
    text = str(error)
    return GroupOutcome(group, FAILED, None, text if group in text else f"group {group}: {text}")


def plan_flow_failover(
    config: FerryConfig,
    flow_name: str,
    *,
    groups: str | None = None,
    from_checkpoints: bool = False,
    control: FlowControl | None = None,
    timeout: float = 10.0,
) -> FlowFailover:
    """Plan every group of the flow (nothing is committed); see the module doc."""
    flow = flow_of(config, flow_name)
    pattern = groups_pattern(groups)
    own = frozenset(f.progress_group for f in config.flows)
    report = FlowFailover(flow.name, "checkpoints", dry_run=True)
    clock = _Clock(report.timings)
    with FlowRunsStores(config) as runs, FlowCheckpoints(config) as checkpoints:
        # Checkpointed groups count too: Kafka 4 does not list a group whose offsets were
        # only ever set through the admin API (as a failover sets them).
        with clock("checkpoints"):
            listed = checkpoints.store(flow).groups()
        if not from_checkpoints:
            with clock("source"):
                try:
                    listed += _listed(config.clusters[flow.source], timeout)
                    report.source = "cluster"
                except KafkaUnavailableError as exc:
                    report.notices.append(
                        f"{exc}; every group moves from its checkpoints in {flow.target}"
                    )
        with clock("recovery_point"):
            report.recovery = _recovery(config, flow, report.source == "cluster", control, timeout)
        chosen = select_groups(listed, group_filter(flow), pattern, own)
        # One client of the target for every group, its topics read once.
        target_admin = GroupAdmin(config.clusters[flow.target], timeout=timeout, cache_topics=True)
        source_admin = None
        if report.source == "cluster":
            with clock("source_commits"):
                commits = _source_commits(config.clusters[flow.source], timeout)
            source_admin = GroupAdmin(
                config.clusters[flow.source], timeout=timeout, cache_topics=True, commits=commits
            )

        def plan_one(group: str) -> tuple[GroupOutcome, FailoverPlan | None]:
            try:
                plan = plan_failover(
                    config,
                    group,
                    flow.source,
                    flow.target,
                    timeout=timeout,
                    from_checkpoints=report.source == "checkpoints",
                    control=control,
                    runs=runs,
                    checkpoints=checkpoints,
                    target_admin=target_admin,
                    source_admin=source_admin,
                )
            except NoPositionError as exc:
                return no_position(group, exc), None
            except KafkaUnavailableError as exc:
                if exc.cluster == flow.target:
                    raise  # no group can move: say it once
                return failed(group, exc), None
            except FerryError as exc:
                return failed(group, exc), None
            return decide(plan), plan

        with clock("plan"):
            for group, (outcome, plan) in zip(chosen, _side_by_side(plan_one, chosen), strict=True):
                if plan is not None:
                    report.plans[group] = plan
                report.groups.append(outcome)
    return report


def apply_flow_failover(
    config: FerryConfig,
    report: FlowFailover,
    *,
    timeout: float = 10.0,
    admin_commits: bool = False,
) -> FlowFailover:
    """Commit, for each group to move, the partitions behind their translated offset (through
    `apply_failover`, as `ferry failover group` does); the others are not touched.
    `admin_commits`: through the admin API, for a one-shot command (GroupAdmin says why)."""
    report.dry_run = False
    flow = flow_of(config, report.flow)
    admin = GroupAdmin(  # one for every group
        config.clusters[flow.target], timeout=timeout, admin_commits=admin_commits
    )
    to_move = [i for i, outcome in enumerate(report.groups) if outcome.status == TO_MOVE]

    def commit(i: int) -> GroupOutcome:
        outcome = report.groups[i]
        plan = report.plans[outcome.group]
        moving = [m.position for m in outcome.moves if m.action == "move"]
        try:
            apply_failover(config, replace(plan, positions=moving), timeout=timeout, admin=admin)
        except FerryError as exc:
            return replace(outcome, status=FAILED, detail=failed(plan.group, exc).detail)
        plan.committed = True
        detail = f"{len(moving)} partition(s) committed on {plan.to_alias}"
        return replace(outcome, status=MOVED, detail=detail)

    with _Clock(report.timings)("commit"):
        for i, outcome in zip(to_move, _side_by_side(commit, to_move), strict=True):
            report.groups[i] = outcome
    return report


_T = TypeVar("_T")
_R = TypeVar("_R")


def _side_by_side(work: Callable[[_T], _R], items: list[_T]) -> list[_R]:
    """`work(item)` for every item, up to CONCURRENT_GROUPS at a time; the answers in the
    items' order. An exception `work` raises is raised here, the first in that order, and
    the items not started yet are not started."""
    if len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(CONCURRENT_GROUPS, len(items))) as pool:
        futures: list[Future[_R]] = [pool.submit(work, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


class _Clock:
    """`with clock("phase"):` adds the block's seconds to `timings["phase"]`."""

    def __init__(self, timings: dict[str, float]) -> None:
        self._timings = timings
        self._phase = ""
        self._began = 0.0

    def __call__(self, phase: str) -> _Clock:
        self._phase = phase
        return self

    def __enter__(self) -> None:
        self._began = time.monotonic()

    def __exit__(self, *_exc: object) -> None:
        spent = time.monotonic() - self._began
        self._timings[self._phase] = self._timings.get(self._phase, 0.0) + spent


def _source_commits(cluster: ClusterConfig, timeout: float) -> OffsetsLogIndex:
    """Which partitions each group committed in on the source, read once for every group (a
    group is then asked for those alone); an index that cannot be read leaves each group
    asked for every partition, as before: slower, the same answer."""
    commits = OffsetsLogIndex(cluster, timeout=max(timeout, 30.0))
    try:
        if not commits.refresh():
            log.info("every partition asked of each group: %s", commits.unusable)
    finally:
        commits.close()  # what it read is kept; only its client goes
    return commits


def flow_of(config: FerryConfig, name: str) -> FlowConfig:
    """The flow `--flow` names, or a ConfigError saying what the config has."""
    source, target = parse_flow(name)
    for alias in (source, target):
        if alias not in config.clusters:
            raise ConfigError(
                f"--flow {name}: no cluster {alias}; the config has {', '.join(config.clusters)}",
                file=str(config.path) if config.path else None,
            )
    try:
        return config.flow(source, target)
    except KeyError:
        raise ConfigError(f"--flow {name}: the config has no flow {source}->{target}") from None


def groups_pattern(groups: str | None) -> re.Pattern[str] | None:
    if groups is None:
        return None
    try:
        return re.compile(groups)
    except re.error as exc:
        raise ConfigError(f"--groups {groups}: not a regular expression ({exc})") from None


def _listed(cluster: ClusterConfig, timeout: float) -> list[str]:
    """The groups on `cluster`; KafkaUnavailableError if it does not answer (listing groups
    alone can answer an empty list then). Decided once for every group: a cluster that does
    not answer at all is given `timeout`; one whose every broker refuses the connection
    (librdkafka says all brokers are down) and still does after PROBE_SECONDS of retries is
    given up then, not after `timeout`."""
    down = threading.Event()

    def on_error(error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            down.set()

    admin = GroupAdmin(cluster, timeout=timeout, on_error=on_error)
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            with kafka_errors(cluster, "list topics"):
                admin.list_topics(timeout=max(0.01, min(PROBE_SECONDS, left)))
            break
        except KafkaUnavailableError:
            admin.poll()  # the error callback, now
            if left <= PROBE_SECONDS or down.is_set():
                raise
    return admin.groups()


def _recovery(
    config: FerryConfig,
    flow: FlowConfig,
    source_answers: bool,
    control: FlowControl | None,
    timeout: float,
) -> RecoveryPoint:
    """The flow's recovery point; one that cannot be read says why and moves nothing less."""
    try:
        if source_answers:
            return recovery_point.measured(config, flow, control=control, timeout=timeout)
        return recovery_point.proven(config, flow, timeout=timeout)
    except (FerryError, TimeoutError) as exc:
        now = int(time.time() * 1000)
        return RecoveryPoint("unknown", flow.source, flow.target, now, error=str(exc))
