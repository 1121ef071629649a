"""`ferry failover`: commit where consumers resume on another cluster (failover, failback), one
subcommand per what moves: `group` (one consumer group), `flow` (every group a flow syncs),
`spark-checkpoint` (a Spark Structured Streaming query's checkpoint). Each subcommand takes only
its own options, so typer states which go together.

The old spelling, one command with the options `--group`, `--flow` or `--spark-checkpoint`
choosing what moves, still runs for one release: `failover_alias`, the group's callback, takes
those options (hidden from --help), says on stderr how the same is written now, checks the
combinations the subcommands now make impossible, and does what the subcommand does."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.cli.offsets_commands import (
    CheckpointsOption,
    FromOption,
    ToOption,
    print_plan,
    recorded_control,
)
from ferry.terminal.console import err, out

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig
    from ferry.offsets.flow_failover import FlowFailover
    from ferry.offsets.recovery_point import RecoveryPoint

__all__ = ["failover_app"]

failover_app = typer.Typer(
    no_args_is_help=True,
    help="Commit where consumers resume on another cluster (failover, failback): one consumer "
    "group, every group a flow syncs, or a Spark query's checkpoint. The old spelling "
    "(`ferry failover --group G ...`, `--flow A->B`, `--spark-checkpoint DIR`) still runs in "
    "this release, with a note on stderr naming the new one.",
)

DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show, do not commit")]
GroupsOption = Annotated[
    str | None,
    typer.Option(
        "--groups", help="Only the groups whose whole name matches this regex", metavar="REGEX"
    ),
]
ByTimestampOption = Annotated[
    bool,
    typer.Option(
        "--by-timestamp",
        help="Seek by the timestamps the group recorded in __consumer_timestamps "
        "(re-delivers the last record consumed) instead of exact translation",
    ),
]
SinkLogOption = Annotated[
    str | None,
    typer.Option(
        "--sink-log",
        metavar="DIR",
        help="The query's sink batch log (<output>/_spark_metadata), read when a planned batch "
        "has no copy on --to",
    ),
]


@failover_app.command("group")
def failover_group(
    config: ConfigOption,
    group: Annotated[str, typer.Argument(metavar="GROUP", help="Consumer group id")],
    from_alias: FromOption,
    to_alias: ToOption,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
    by_timestamp: ByTimestampOption = False,
) -> None:
    """Commit a consumer group's translated offsets on another cluster (failover, failback)."""
    _failover_group(
        load(config), group, from_alias, to_alias, dry_run, as_json, from_checkpoints, by_timestamp
    )


@failover_app.command("flow")
def failover_flow(
    config: ConfigOption,
    flow: Annotated[
        str, typer.Argument(metavar="A->B", help="The flow SOURCE->TARGET whose groups move")
    ],
    groups: GroupsOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
) -> None:
    """Commit every consumer group the flow syncs on its target, never moving one back; exit 3
    when some group was skipped."""
    _failover_flow(load(config), flow, groups, dry_run, as_json, from_checkpoints)


@failover_app.command("spark-checkpoint")
def failover_spark_checkpoint(
    config: ConfigOption,
    checkpoint: Annotated[
        str,
        typer.Argument(
            metavar="DIR",
            help="The query's checkpoint (a path or any URI Spark reads), rewritten for --to; "
            "the originals kept in DIR/ferry-backup",
        ),
    ],
    from_alias: Annotated[str, typer.Option("--from", help="Cluster alias the query leaves")],
    to_alias: Annotated[str, typer.Option("--to", help="Cluster alias the query moves to")],
    sink_log: SinkLogOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Move a Spark Structured Streaming query reading Kafka: its checkpoint rewritten for
    --to, every offset translated exactly, or nothing changed."""
    from ferry.cli.spark_checkpoint_command import spark_checkpoint_failover

    spark_checkpoint_failover(
        load(config),
        checkpoint,
        from_alias,
        to_alias,
        sink_log=sink_log,
        dry_run=dry_run,
        as_json=as_json,
    )


@failover_app.callback(invoke_without_command=True)
def failover_alias(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option("--config", "-c", hidden=True)] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", hidden=True)] = None,
    from_alias: Annotated[str | None, typer.Option("--from", hidden=True)] = None,
    to_alias: Annotated[str | None, typer.Option("--to", hidden=True)] = None,
    flow: Annotated[str | None, typer.Option("--flow", hidden=True)] = None,
    groups: Annotated[str | None, typer.Option("--groups", hidden=True)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", hidden=True)] = False,
    as_json: Annotated[bool, typer.Option("--json", hidden=True)] = False,
    from_checkpoints: Annotated[bool, typer.Option("--from-checkpoints", hidden=True)] = False,
    by_timestamp: Annotated[bool, typer.Option("--by-timestamp", hidden=True)] = False,
    spark_checkpoint: Annotated[str | None, typer.Option("--spark-checkpoint", hidden=True)] = None,
    sink_log: Annotated[str | None, typer.Option("--sink-log", hidden=True)] = None,
) -> None:
    """Commit where consumers resume on another cluster (failover, failback): one consumer
    group, every group a flow syncs, or a Spark query's checkpoint."""
    flags = {p.name: p.opts[0] for p in ctx.command.params}
    # By name: typer carries its own copy of click, whose ParameterSource is not click's.
    given = [
        flags[name]
        for name in ctx.params
        if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    ]
    if ctx.invoked_subcommand is not None:
        if given:
            raise typer.BadParameter(
                f"{', '.join(given)} go after the subcommand: ferry failover "
                f"{ctx.invoked_subcommand} -c CONFIG ... (see ferry failover "
                f"{ctx.invoked_subcommand} --help)"
            )
        return
    err.print(f"note: {_new_spelling(ctx.params, flags)}", highlight=False, markup=False)
    if config is None:
        raise typer.BadParameter("give --config (-c)")
    if spark_checkpoint is not None:
        if group is not None or flow is not None or from_checkpoints or by_timestamp:
            raise typer.BadParameter(
                "--spark-checkpoint moves a Spark query, not a group: leave out --group, "
                "--flow, --from-checkpoints and --by-timestamp"
            )
        if from_alias is None or to_alias is None:
            raise typer.BadParameter("--spark-checkpoint needs --from and --to")
        failover_spark_checkpoint(
            config, spark_checkpoint, from_alias, to_alias, sink_log, dry_run, as_json
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
        failover_flow(config, flow, groups, dry_run, as_json, from_checkpoints)
        return
    if group is None or from_alias is None or to_alias is None or groups is not None:
        raise typer.BadParameter("give --group with --from and --to, or --flow (with --groups)")
    failover_group(
        config, group, from_alias, to_alias, dry_run, as_json, from_checkpoints, by_timestamp
    )


# The old spelling's options each subcommand takes, after the value it names.
_SUBCOMMANDS = (
    ("spark_checkpoint", "spark-checkpoint", ("from_alias", "to_alias", "sink_log")),
    ("flow", "flow", ("groups", "from_checkpoints")),
    ("group", "group", ("from_alias", "to_alias", "from_checkpoints", "by_timestamp")),
)


def _new_spelling(params: dict[str, object], flags: dict[str, str]) -> str:
    """One line: the old spelling goes after this release, and the same command as it is
    written now (every value given, verbatim but quoted for a shell), or the three subcommands
    when the options name none."""
    for name, subcommand, options in _SUBCOMMANDS:
        value = params[name]
        if value is None:
            continue
        line = ["ferry", "failover", subcommand]
        if params["config"] is not None:
            line += ["-c", shlex.quote(str(params["config"]))]
        words: list[str] = []
        for option in (*options, "dry_run", "as_json"):
            given = params[option]
            if given is True:
                words.append(flags[option])
            elif given is not None and given is not False:
                words += [flags[option], shlex.quote(str(given))]
        named = shlex.quote(str(value))
        if str(value).startswith("-"):  # it would read as an option: last, after `--`
            line += [*words, "--", named]
        else:
            line += [named, *words]
        return (
            f"ferry failover {flags[name]} is now ferry failover {subcommand}, and the old "
            f"spelling goes after this release: {' '.join(line)}"
        )
    return (
        "ferry failover's options now follow a subcommand, and the old spelling goes after "
        "this release: ferry failover group GROUP, ferry failover flow A->B or ferry failover "
        "spark-checkpoint DIR (see ferry failover --help)"
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

    control = recorded_control(cfg, from_alias, to_alias)
    planner = plan_failover_by_timestamp if by_timestamp else plan_failover
    plan = planner(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    if not dry_run:
        topics = frozenset(p.target_topic for p in plan.positions)
        _lift_protection(cfg, from_alias, to_alias, topics, as_json)
        apply_failover(cfg, plan)
    print_plan(plan, as_json)
    if not as_json:
        if plan.committed:
            out.print(f"committed group {group} on {to_alias}: start its consumers there")
        else:
            out.print("dry run: nothing was committed")


def _lift_protection(
    cfg: FerryConfig, source: str, target: str, topics: frozenset[str] | None, as_json: bool
) -> None:
    """The remote topics' protection lifted (all of the flow's, or `topics`), where the
    config has the flow `source->target` whose copies they are."""
    from ferry.control.protection import lift_protection

    try:
        flow = cfg.flow(source, target)
    except KeyError:
        return
    lift_protection(cfg, flow, topics, err.print if as_json else out.print)


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
    if not dry_run:  # first: the copies on the target become the applications' topics
        _lift_protection(cfg, chosen.source, chosen.target, None, as_json)
    control = recorded_control(cfg, chosen.source, chosen.target)
    report = plan_flow_failover(
        cfg, flow, groups=groups, from_checkpoints=from_checkpoints, control=control
    )
    if not dry_run:
        apply_flow_failover(cfg, report, admin_commits=True)  # a one-shot command
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
