"""`ferry translate` and `ferry failover`: move a consumer group from one cluster to another.

The group's committed offsets are read on the cluster it leaves (`from`) when that cluster
answers; each partition is then translated exactly, along a route of flows
(`ferry.offsets.routes`):
- a topic that a flow `from -> to` replicates: forward through that flow's runs;
- a remote topic on `from` that came from `to` (failback after a failover): back through the
  runs of the flow `to -> from`, to the original topic;
- more hops where no flow joins the two: forward along a chain A->B->C, back along it, or
  back to the origin and forward again between two aggregates fed by the same sources.
When `from` does not answer (the datacenter is lost), the group's checkpoints in `to` are used:
they are as recent as the last `emit.checkpoints.interval.seconds`. Without a flow `from -> to`
(a chain A->B->C failing over from a lost A to C), the checkpoints another flow from `from`
wrote in its target are carried on from there, along routes that avoid `from`.

Offsets are committed on `to` only for a group without active members there: the brokers
would refuse otherwise, and a running consumer would not see the new positions anyway.
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from ferry.config.model import FerryConfig, FlowConfig
from ferry.errors import ConfigError, FerryError, KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.kafka.errors import kafka_errors
from ferry.kafka.log import quiet
from ferry.kafka.mm2_records import Checkpoint
from ferry.offsets.consumer_timestamps import offsets_for_timestamps, read_group_timestamps
from ferry.offsets.groups import GroupAdmin, GroupState
from ferry.offsets.routes import RouteHop, routes
from ferry.offsets.runs_and_checkpoints import CheckpointStore, FlowRunsStores
from ferry.offsets.translation import Position, checkpoint_positions, routed_position

__all__ = [
    "FailoverPlan",
    "FlowCheckpoints",
    "NoPositionError",
    "apply_failover",
    "plan_failover",
    "plan_failover_by_timestamp",
]


class NoPositionError(FerryError):
    """No position of the group is known: nothing committed on `from`, no checkpoint in `to`,
    or none of its partitions replicated there. A whole-flow failover skips such a group."""


@dataclass
class FailoverPlan:
    group: str
    from_alias: str
    to_alias: str
    source: str  # "cluster": offsets read on `from`; "checkpoints": from `to`'s checkpoints
    positions: list[Position]
    not_replicated: list[tuple[str, int, int]]  # (topic, partition, committed) with no copy
    target_state: GroupState
    previous: dict[tuple[str, int], int]  # the group's offsets on `to` before the failover
    notices: list[str] = field(default_factory=list)
    committed: bool = False

    def offsets(self) -> dict[tuple[str, int], int]:
        return {(p.target_topic, p.partition): p.offset for p in self.positions}

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "from": self.from_alias,
            "to": self.to_alias,
            "source": self.source,
            "positions": [
                {**p.as_json(), "previous": self.previous.get((p.target_topic, p.partition))}
                for p in self.positions
            ],
            "not_replicated": [
                {"topic": t, "partition": p, "committed": o} for t, p, o in self.not_replicated
            ],
            "active_members": list(self.target_state.members),
            "committed": self.committed,
            "notices": self.notices,
        }


class FlowCheckpoints:
    """Each flow's checkpoints in its target (`store(flow)`), read once, on first use; closed
    when the `with` block ends."""

    def __init__(self, config: FerryConfig) -> None:
        self._config = config
        self._stores: dict[str, CheckpointStore] = {}
        self._lock = threading.Lock()  # groups planned side by side read each flow once

    def store(self, flow: FlowConfig) -> CheckpointStore:
        with self._lock:
            if flow.name not in self._stores:
                policy = flow.replication_policy
                target = self._config.clusters[flow.target]
                store = CheckpointStore(target, policy.checkpoints_topic(flow.source))
                self._stores[flow.name] = store.refresh()
            return self._stores[flow.name]

    def __enter__(self) -> FlowCheckpoints:
        return self

    def __exit__(self, *_exc: object) -> None:
        for store in self._stores.values():
            store.close()


def plan_failover(
    config: FerryConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    *,
    timeout: float = 10.0,
    from_checkpoints: bool = False,
    control: FlowControl | None = None,
    runs: FlowRunsStores | None = None,
    checkpoints: FlowCheckpoints | None = None,
    target_admin: GroupAdmin | None = None,
    source_admin: GroupAdmin | None = None,
) -> FailoverPlan:
    """`control`: the flow `from->to`'s runtime override (topics added or removed over the
    API, see ferry.control), so those topics count as replicated or not as they are.
    `runs`, `checkpoints`, `target_admin`, `source_admin`: offset runs and checkpoints
    already read, and clients of `to` and `from` (many groups planned together read them
    once and share them)."""
    _check_aliases(config, from_alias, to_alias)
    origin = config.clusters[from_alias]
    destination = config.clusters[to_alias]
    notices: list[str] = []
    committed: dict[tuple[str, int], int] | None = None
    if not from_checkpoints:
        try:
            committed = (source_admin or GroupAdmin(origin, timeout=timeout)).committed(group)
        except KafkaUnavailableError as exc:
            notices.append(f"{exc}; translating from the checkpoints in {to_alias} instead")
    target_admin = target_admin or GroupAdmin(destination, timeout=timeout)
    if committed is None:
        positions, not_replicated = _from_checkpoints(
            config, group, from_alias, to_alias, checkpoints
        )
        source = "checkpoints"
    else:
        if not committed:
            raise NoPositionError(
                f"group {group} has no committed offsets on cluster {from_alias}; "
                "check the group name (ferry translates what a group committed)"
            )
        positions, not_replicated = _from_cluster(
            config, committed, from_alias, to_alias, control, runs
        )
        source = "cluster"
    positions, missing = _existing_on_target(target_admin, positions)
    not_replicated += missing
    for p in positions:
        if p.beyond:
            notices.append(
                f"{p.topic} partition {p.partition}: the group is {p.beyond} offset(s) past "
                f"what has been replicated to {to_alias}; records copied there later will be "
                "delivered again (run ferry until it has caught up to avoid this)"
            )
    return _plan_on_target(
        target_admin, group, (from_alias, to_alias), source, positions, not_replicated, notices
    )


def plan_failover_by_timestamp(
    config: FerryConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    *,
    timeout: float = 10.0,
    from_checkpoints: bool = False,
    control: FlowControl | None = None,
) -> FailoverPlan:
    """Translate by the timestamp of the last record the group consumed in each partition.

    For applications that record their commits with `ConsumerTimestampsRecorder` (on `from`,
    mirrored to `to` by `ferry run`). Each partition resumes at the first record on `to`
    stamped at or after that timestamp: the record(s) sharing that millisecond, at least the
    last one consumed, are delivered again. Prefer exact translation where runs exist.
    """
    _check_aliases(config, from_alias, to_alias)
    flow = config.flow(from_alias, to_alias)
    policy = flow.replication_policy
    notices: list[str] = []
    positions_read = None
    if not from_checkpoints:
        try:
            positions_read = read_group_timestamps(
                quiet(config.clusters[from_alias].admin_config()), group, timeout=timeout
            )
        except TimeoutError as exc:
            notices.append(
                f"cluster {from_alias} is unreachable ({exc}); using the consumer timestamps "
                f"mirrored to {to_alias} instead"
            )
    source = "cluster"
    if positions_read is None:
        source = "checkpoints"
        mirrored = policy.consumer_timestamps_topic(from_alias)
        positions_read = read_group_timestamps(
            quiet(config.clusters[to_alias].admin_config()),
            group,
            topic=mirrored,
            timeout=timeout,
        )
    if not positions_read:
        raise FerryError(
            f"no consumer timestamps recorded for group {group} ({from_alias}'s "
            "__consumer_timestamps); applications record them by committing through "
            "ferry.offsets.consumer_timestamps.ConsumerTimestampsRecorder"
        )
    selector = TopicSelector(flow, policy, control)
    target_admin = GroupAdmin(config.clusters[to_alias], timeout=timeout)
    candidates = [
        Position(t, p, pos.offset, policy.remote_topic(from_alias, t), -1, "timestamp", "timestamp")
        for (t, p), pos in sorted(positions_read.items())
        if selector.accepts(t)
    ]
    existing, not_replicated = _existing_on_target(target_admin, candidates)
    wanted = {
        (c.target_topic, c.partition): positions_read[(c.topic, c.partition)].timestamp
        for c in existing
    }
    offsets = offsets_for_timestamps(
        quiet(config.clusters[to_alias].admin_config()), wanted, timeout=timeout
    )
    positions = [replace(c, offset=offsets[(c.target_topic, c.partition)]) for c in existing]
    not_replicated += [
        (t, p, pos.offset)
        for (t, p), pos in sorted(positions_read.items())
        if not selector.accepts(t)
    ]
    return _plan_on_target(
        target_admin, group, (from_alias, to_alias), source, positions, not_replicated, notices
    )


def _plan_on_target(
    target_admin: GroupAdmin,
    group: str,
    aliases: tuple[str, str],
    source: str,
    positions: list[Position],
    not_replicated: list[tuple[str, int, int]],
    notices: list[str],
) -> FailoverPlan:
    """The plan, with the group's state and offsets on the target as they are now."""
    state = target_admin.state(group)
    # Only the partitions the plan moves: what it shows and compares (no metadata read).
    previous = target_admin.committed(group, {(p.target_topic, p.partition) for p in positions})
    return FailoverPlan(
        group, *aliases, source, positions, not_replicated, state, previous, notices
    )


def _check_aliases(config: FerryConfig, from_alias: str, to_alias: str) -> None:
    for alias, option in ((from_alias, "--from"), (to_alias, "--to")):
        if alias not in config.clusters:
            raise ConfigError(
                f"{option} {alias}: no such cluster; the config has {', '.join(config.clusters)}",
                file=str(config.path) if config.path else None,
            )
    if from_alias == to_alias:
        raise ConfigError(f"--from and --to are both {from_alias}; name two clusters")


def apply_failover(
    config: FerryConfig,
    plan: FailoverPlan,
    *,
    timeout: float = 10.0,
    admin: GroupAdmin | None = None,
) -> None:
    """Commit the plan's offsets for its group on the `to` cluster (through `admin`, a client
    of it, when given: many groups committed in a row share one)."""
    if plan.target_state.active:
        members = ", ".join(plan.target_state.members[:5])
        raise FerryError(
            f"group {plan.group} has {len(plan.target_state.members)} active member(s) on "
            f"cluster {plan.to_alias} ({members}); stop those consumers first: offsets can "
            "only be committed for a group with no members (nothing was changed)"
        )
    if not plan.positions:
        raise NoPositionError(
            f"nothing to commit for group {plan.group} on {plan.to_alias}: none of its "
            f"partitions on {plan.from_alias} has been replicated there"
        )
    admin = admin or GroupAdmin(config.clusters[plan.to_alias], timeout=timeout)
    admin.commit(plan.group, plan.offsets())
    plan.committed = True


def _from_cluster(
    config: FerryConfig,
    committed: dict[tuple[str, int], int],
    from_alias: str,
    to_alias: str,
    control: FlowControl | None = None,
    runs_read: FlowRunsStores | None = None,
) -> tuple[list[Position], list[tuple[str, int, int]]]:
    """Each partition along the shortest route of flows whose runs carry it (see
    `ferry.offsets.routes`): one hop for a direct flow or its failback, more for a chain or
    between two aggregates."""
    direct = f"{from_alias}->{to_alias}"

    def control_of(flow: FlowConfig) -> FlowControl | None:
        return control if flow.name == direct else None

    positions: list[Position] = []
    left: list[tuple[str, int, int]] = []
    by_topic: dict[str, list[tuple[RouteHop, ...]]] = {}
    stores: AbstractContextManager[FlowRunsStores] = (
        FlowRunsStores(config) if runs_read is None else nullcontext(runs_read)
    )
    with stores as runs:
        for (topic, partition), offset in sorted(committed.items()):
            if topic not in by_topic:
                by_topic[topic] = routes(config, from_alias, topic, to_alias, control_of)
            carried = _first_route(by_topic[topic], partition, offset, runs)
            if carried is None:
                left.append((topic, partition, offset))
            else:
                positions.append(carried[1])
    return positions, left


def _first_route(
    found: list[tuple[RouteHop, ...]], partition: int, offset: int, runs: FlowRunsStores
) -> tuple[tuple[RouteHop, ...], Position] | None:
    """The first of the routes `found` whose runs carry the partition, and where it lands."""
    for route in found:
        position = routed_position(route, partition, offset, runs)
        if position is not None:
            return route, position
    return None


def _from_checkpoints(
    config: FerryConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    read: FlowCheckpoints | None = None,
) -> tuple[list[Position], list[tuple[str, int, int]]]:
    """The group's checkpoints in `to`, written by the flow `from->to`; without a direct flow
    (a chain A->B->C failing over from a lost A to C), the checkpoints another flow from
    `from` wrote in its target, carried on to `to` along routes of flows that avoid `from`."""
    direct = config.flow(from_alias, to_alias)
    checkpoints, looked_in = _checkpoints(config, direct, group, read), [_checkpoints_at(direct)]
    if checkpoints:
        return checkpoint_positions(checkpoints, direct.replication_policy), []
    for flow in config.flows:
        if flow.source != from_alias or flow.target == to_alias or not flow.enabled:
            continue
        checkpoints = _checkpoints(config, flow, group, read)
        looked_in.append(_checkpoints_at(flow))
        if checkpoints:
            first = checkpoint_positions(checkpoints, flow.replication_policy)
            return _onward(config, first, flow, to_alias)
    raise NoPositionError(
        f"cluster {from_alias} did not answer and no checkpoint for group {group} was found "
        f"({'; '.join(looked_in)}); checkpoints are written by `ferry run` for the groups a "
        f"flow from {from_alias} selects (groups, groups.exclude, emit.checkpoints.enabled)"
    )


def _checkpoints_at(flow: FlowConfig) -> str:
    policy = flow.replication_policy
    return f"{flow.target}'s {policy.checkpoints_topic(flow.source)}"


def _checkpoints(
    config: FerryConfig, flow: FlowConfig, group: str, read: FlowCheckpoints | None = None
) -> list[Checkpoint]:
    if read is not None:
        return read.store(flow).of_group(group)
    policy = flow.replication_policy
    store = CheckpointStore(config.clusters[flow.target], policy.checkpoints_topic(flow.source))
    try:
        return store.refresh().of_group(group)
    finally:
        store.close()


def _onward(
    config: FerryConfig, first: list[Position], flow: FlowConfig, to_alias: str
) -> tuple[list[Position], list[tuple[str, int, int]]]:
    """Positions on `flow`'s target (from its checkpoints) carried on to `to_alias` through
    the runs of the flows between them, never through `flow`'s source (it is lost)."""
    positions: list[Position] = []
    left: list[tuple[str, int, int]] = []
    by_topic: dict[str, list[tuple[RouteHop, ...]]] = {}
    with FlowRunsStores(config) as runs:
        for p in first:
            if p.target_topic not in by_topic:
                by_topic[p.target_topic] = routes(
                    config, flow.target, p.target_topic, to_alias, avoid=frozenset({flow.source})
                )
            carried = _first_route(by_topic[p.target_topic], p.partition, p.offset, runs)
            if carried is None:
                left.append((p.topic, p.partition, p.committed))
                continue
            route, found = carried
            via = ", ".join([f"checkpoint {flow.name}", *(hop.label for hop in route)])
            positions.append(replace(found, topic=p.topic, committed=p.committed, via=via))
    return positions, left


def _existing_on_target(
    admin: GroupAdmin, positions: list[Position]
) -> tuple[list[Position], list[tuple[str, int, int]]]:
    with kafka_errors(admin.cluster, "list topics"):
        topics = admin.list_topics()
    kept, missing = [], []
    for p in positions:
        meta = topics.get(p.target_topic)
        if meta is not None and meta.error is None and p.partition in meta.partitions:
            kept.append(p)
        else:
            missing.append((p.topic, p.partition, p.committed))
    return kept, missing
