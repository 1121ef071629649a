"""`ferry translate` and `ferry failover`: where a consumer group resumes on another cluster,
shown or committed; `ferry translate --offsets`: offsets an application stores itself."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.errors import FerryError
from ferry.terminal.console import err, out

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig
    from ferry.flows.control import FlowControl
    from ferry.offsets.failover import FailoverPlan
    from ferry.offsets.flow_failover import FlowFailover
    from ferry.offsets.recovery_point import RecoveryPoint

__all__ = ["failover", "translate"]

FromOption = Annotated[str, typer.Option("--from", help="Cluster alias the group leaves")]
ToOption = Annotated[str, typer.Option("--to", help="Cluster alias the group moves to")]
CheckpointsOption = Annotated[
    bool,
    typer.Option(
        "--from-checkpoints",
        help="Use the checkpoints in --to even if --from answers (as when it is lost)",
    ),
]


OffsetsOption = Annotated[
    str | None,
    typer.Option(
        "--offsets",
        help="Translate stored offsets instead of a group's: a file (or - for stdin) of JSON "
        'lines {"topic": ..., "partition": ..., "offset": ...}',
        metavar="FILE|-",
    ),
]


def translate(
    config: ConfigOption,
    from_alias: FromOption,
    to_alias: ToOption,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group id")] = None,
    offsets: OffsetsOption = None,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
) -> None:
    """Print where a consumer group (--group), or each stored offset (--offsets), would
    resume on another cluster."""
    from ferry.offsets.failover import plan_failover

    if offsets is not None:
        if group is not None or from_checkpoints:
            raise typer.BadParameter(
                "--offsets translates stored offsets through offset runs: "
                "leave out --group and --from-checkpoints"
            )
        _translate_stored(load(config), offsets, from_alias, to_alias, as_json)
        return
    if group is None:
        raise typer.BadParameter("give --group (a consumer group) or --offsets (stored offsets)")
    cfg = load(config)
    control = _recorded_control(cfg, from_alias, to_alias)
    plan = plan_failover(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    _print_plan(plan, as_json)


def _translate_stored(
    cfg: FerryConfig, source: str, from_alias: str, to_alias: str, as_json: bool
) -> None:
    """One answer per input line, in order; exit 1 when any line could not be translated."""
    import sys
    from pathlib import Path

    from ferry.client import translate_stored_offsets
    from ferry.offsets.stored import Untranslatable, parse_lines

    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise FerryError(f"--offsets {source}: cannot read it ({exc.strerror})") from exc
    positions = parse_lines(text.splitlines())
    control = None
    if not all(isinstance(p, Untranslatable) for p in positions):
        control = _recorded_control(cfg, from_alias, to_alias, unreachable_target_fails=True)
    answers = translate_stored_offsets(cfg, from_alias, to_alias, positions, control=control)
    if as_json:
        for answer in answers:
            print(json.dumps(answer.as_json()))
    else:
        _print_stored(answers, from_alias, to_alias)
    failed = sum(isinstance(a, Untranslatable) for a in answers)
    if failed:
        err.print(
            f"{failed} of {len(answers)} offset(s) could not be translated",
            highlight=False,
            markup=False,
        )
        raise typer.Exit(1)


def _print_stored(answers: list[Any], from_alias: str, to_alias: str) -> None:
    # Any: Translated | Untranslatable, told apart by hasattr (which mypy cannot narrow on).
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"stored offsets: {from_alias} -> {to_alias}"))
    for column in ("topic", "partition", "offset", "to topic", "to partition", "to offset"):
        table.add_column(column, justify="left" if "topic" in column else "right")
    table.add_column("how")
    for a in answers:
        if hasattr(a, "remote_offset"):
            how = a.via if a.match == "exact" else f"{a.via} ({a.match})"
            cells = [a.topic, a.partition, a.offset, a.remote_topic, a.remote_partition]
            cells += [a.remote_offset, how]
        else:
            fields = a.fields
            cells = [fields.get("topic", ""), fields.get("partition", ""), fields.get("offset", "")]
            cells += ["", "", "", f"error: {a.error}"]
        table.add_row(*(Text(str(c)) for c in cells))
    out.print(table)


def _recorded_control(
    cfg: FerryConfig, from_alias: str, to_alias: str, *, unreachable_target_fails: bool = False
) -> FlowControl | None:
    """What the API changed about the flow (topics added or removed), if it is recorded.

    `unreachable_target_fails`: a `to` cluster that does not answer ends the command here
    (its runs cannot be read either), instead of a note and a second wait."""
    from ferry.control.log import recorded_control
    from ferry.errors import KafkaUnavailableError

    try:
        return recorded_control(cfg, from_alias, to_alias)
    except FerryError as exc:
        unreachable = isinstance(exc, KafkaUnavailableError) and exc.cluster == to_alias
        if unreachable and unreachable_target_fails:
            raise
        err.print(
            f"note: could not read the control state ({exc}); topics added or removed over "
            "the API count as the config file says"
        )
        return None


FlowOption = Annotated[
    str | None,
    typer.Option(
        "--flow",
        help="Move every consumer group the flow SOURCE->TARGET syncs, instead of --group",
        metavar="A->B",
    ),
]
GroupsOption = Annotated[
    str | None,
    typer.Option(
        "--groups",
        help="With --flow: only the groups whose whole name matches this regex",
        metavar="REGEX",
    ),
]


def failover(
    config: ConfigOption,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group id")] = None,
    from_alias: Annotated[
        str | None, typer.Option("--from", help="Cluster alias the group leaves")
    ] = None,
    to_alias: Annotated[
        str | None, typer.Option("--to", help="Cluster alias the group moves to")
    ] = None,
    flow: FlowOption = None,
    groups: GroupsOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, do not commit")] = False,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
    by_timestamp: Annotated[
        bool,
        typer.Option(
            "--by-timestamp",
            help="Seek by the timestamps the group recorded in __consumer_timestamps "
            "(re-delivers the last record consumed) instead of exact translation",
        ),
    ] = False,
    spark_checkpoint: Annotated[
        str | None,
        typer.Option(
            "--spark-checkpoint",
            metavar="DIR",
            help="Move a Spark Structured Streaming query reading Kafka instead of a group: "
            "its checkpoint (a path or any URI Spark reads) is rewritten for --to, the "
            "originals kept in DIR/ferry-backup",
        ),
    ] = None,
    sink_log: Annotated[
        str | None,
        typer.Option(
            "--sink-log",
            metavar="DIR",
            help="With --spark-checkpoint: the query's sink batch log (<output>/_spark_metadata), "
            "read when a planned batch has no copy on --to",
        ),
    ] = None,
) -> None:
    """Commit a consumer group's translated offsets on another cluster (failover, failback);
    with --flow, every group the flow syncs (exit 3 when some were skipped); with
    --spark-checkpoint, a Spark query's checkpoint instead of a group."""
    if spark_checkpoint is not None:
        if group is not None or flow is not None or from_checkpoints or by_timestamp:
            raise typer.BadParameter(
                "--spark-checkpoint moves a Spark query, not a group: leave out --group, "
                "--flow, --from-checkpoints and --by-timestamp"
            )
        if from_alias is None or to_alias is None:
            raise typer.BadParameter("--spark-checkpoint needs --from and --to")
        from ferry.cli.spark_checkpoint_command import spark_checkpoint_failover

        spark_checkpoint_failover(
            load(config),
            spark_checkpoint,
            from_alias,
            to_alias,
            sink_log=sink_log,
            dry_run=dry_run,
            as_json=as_json,
        )
        return
    if sink_log is not None:
        raise typer.BadParameter("--sink-log goes with --spark-checkpoint")
    if flow is not None:
        if group is not None or from_alias is not None or to_alias is not None or by_timestamp:
            raise typer.BadParameter(
                "--flow names the clusters and the groups: leave out --group, --from, --to "
                "and --by-timestamp"
            )
        _failover_flow(load(config), flow, groups, dry_run, as_json, from_checkpoints)
        return
    if group is None or from_alias is None or to_alias is None or groups is not None:
        raise typer.BadParameter("give --group with --from and --to, or --flow (with --groups)")
    _failover_group(
        load(config), group, from_alias, to_alias, dry_run, as_json, from_checkpoints, by_timestamp
    )


def _failover_group(
    cfg: FerryConfig,
    group: str,
    from_alias: str,
    to_alias: str,
    dry_run: bool,
    as_json: bool,
    from_checkpoints: bool,
    by_timestamp: bool,
) -> None:
    from ferry.offsets.failover import apply_failover, plan_failover, plan_failover_by_timestamp

    control = _recorded_control(cfg, from_alias, to_alias)
    planner = plan_failover_by_timestamp if by_timestamp else plan_failover
    plan = planner(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    if not dry_run:
        apply_failover(cfg, plan)
    _print_plan(plan, as_json)
    if not as_json:
        if plan.committed:
            out.print(f"committed group {group} on {to_alias}: start its consumers there")
        else:
            out.print("dry run: nothing was committed")


def _failover_flow(
    cfg: FerryConfig,
    flow: str,
    groups: str | None,
    dry_run: bool,
    as_json: bool,
    from_checkpoints: bool,
) -> None:
    """Every group of the flow; exit 0, EXIT_SKIPPED or 1 (see FlowFailover.exit_code)."""
    from ferry.offsets.flow_failover import (
        apply_flow_failover,
        flow_of,
        groups_pattern,
        plan_flow_failover,
    )

    chosen = flow_of(cfg, flow)
    groups_pattern(groups)  # a bad regex is refused before any cluster is asked
    control = _recorded_control(cfg, chosen.source, chosen.target)
    report = plan_flow_failover(
        cfg, flow, groups=groups, from_checkpoints=from_checkpoints, control=control
    )
    if not dry_run:
        apply_flow_failover(cfg, report)
    if as_json:
        print(json.dumps(report.as_json()))
    else:
        _print_flow_report(report)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _print_flow_report(report: FlowFailover) -> None:
    from rich.table import Table
    from rich.text import Text

    source, target = report.flow.split("->", 1)
    whence = f"{source}'s offsets" if report.source == "cluster" else f"the checkpoints in {target}"
    table = Table(title=Text(f"flow {report.flow}: failover from {whence}"))
    columns = ("group", "topic", "partition", "committed", "to topic", "offset", "before")
    for column in (*columns, "result"):
        numeric = column in ("partition", "committed", "offset", "before")
        table.add_column(column, justify="right" if numeric else "left")
    results = {"move": "moved" if not report.dry_run else "to move", "at": "unchanged"}
    for g in report.groups:
        for m in g.moves:
            p, before = m.position, "" if m.previous is None else str(m.previous)
            result = results.get(m.action, "ahead: left")
            if g.status == "skipped":
                result = "skipped"
            cells = [g.group, p.topic, p.partition, p.committed, p.target_topic, p.offset, before]
            table.add_row(*(Text(str(c)) for c in [*cells, result]))
    out.print(table)
    for g in report.groups:
        why = f" ({g.reason.replace('_', ' ')})" if g.reason else ""
        out.print(Text(f"group {g.group}: {g.status.replace('_', ' ')}{why}: {g.detail}"))
        for notice in g.notices:
            err.print(Text(f"note: group {g.group}: {notice}"))
    for notice in report.notices:
        err.print(Text(f"note: {notice}"))
    if report.recovery is not None:
        _print_recovery(report.recovery)
    counts = ", ".join(f"{report.count(s)} {s.replace('_', ' ')}" for s in _STATUSES)
    out.print(Text(f"{len(report.groups)} group(s): {counts}"))
    if report.dry_run:
        out.print("dry run: nothing was committed")


_STATUSES = ("moved", "to_move", "unchanged", "skipped", "failed")


def _print_recovery(point: RecoveryPoint) -> None:
    from rich.text import Text

    out.print(Text(f"recovery point: {point.statement()}"))
    for t in point.topics:
        if point.kind == "measured":
            age = "unknown" if t.age_seconds is None else f"{t.age_seconds:.1f} s"
            line = f"  {t.topic}: {age} ({t.offsets_behind} offset(s) behind)"
        elif t.age_seconds is None:
            line = f"  {t.topic}: no copy on {point.target}"
        else:
            line = f"  {t.topic}: copied until {t.age_seconds:.1f} s ago"
        out.print(Text(line))
    if point.newest_heartbeat_ms is not None:
        heartbeat_age = (point.at_ms - point.newest_heartbeat_ms) / 1000
        out.print(
            Text(
                f"  newest heartbeat of {point.source} on {point.target}: {heartbeat_age:.1f} s ago"
            )
        )


def _print_plan(plan: FailoverPlan, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.as_json()))
        return
    from rich.table import Table

    table = Table(
        title=f"group {plan.group}: {plan.from_alias} -> {plan.to_alias} "
        f"(from {'checkpoints' if plan.source == 'checkpoints' else plan.from_alias})"
    )
    for column in ("topic", "partition", "committed", "to topic", "offset", "how"):
        table.add_column(
            column, justify="right" if column in ("partition", "committed", "offset") else "left"
        )
    for p in plan.positions:
        how = p.via if p.match in ("exact", "checkpoint") else f"{p.via} ({p.match})"
        table.add_row(
            p.topic, str(p.partition), str(p.committed), p.target_topic, str(p.offset), how
        )
    out.print(table)
    for topic, partition, offset in plan.not_replicated:
        err.print(
            f"{topic} partition {partition} (committed {offset}): not replicated to "
            f"{plan.to_alias}; left alone",
            highlight=False,
        )
    for notice in plan.notices:
        err.print(f"note: {notice}", highlight=False, markup=False)
    if plan.target_state.active:
        err.print(
            f"note: group {plan.group} has {len(plan.target_state.members)} active member(s) "
            f"on {plan.to_alias}",
            highlight=False,
        )
