"""`ferry reconcile`: after an unplanned failover, the records A took that never reached B,
listed and then reported, replayed, diverted or exported (see ferry.ops.reconcile,
ferry.ops.reconcile_writes and ferry.audit.stranded_export)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.errors import ConfigError, FerryError
from ferry.terminal.console import out

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig, FlowConfig
    from ferry.ops.reconcile import ReconcilePlan

__all__ = ["reconcile"]

RANGES_SHOWN = 5  # per partition in the table; --json lists every range


def reconcile(
    config: ConfigOption,
    flow: Annotated[
        str, typer.Option("--flow", help="The flow that was failed over from, e.g. A->B")
    ],
    report_only: Annotated[
        bool, typer.Option("--report-only", help="List the stranded records; write nothing")
    ] = False,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Copy them into their remote topics on the target now, marked ferry.late=1",
        ),
    ] = False,
    divert: Annotated[
        str | None,
        typer.Option(
            "--divert",
            metavar="TOPIC",
            help="Copy them into this quarantine topic on the target (created if missing)",
        ),
    ] = None,
    export: Annotated[
        str | None,
        typer.Option(
            "--export",
            metavar="DIR",
            help="Write them as Parquet files under DIR/<source>-to-<target>/ (a Spark job); "
            "DIR is a local path or a Hadoop filesystem URI such as hdfs://namenode:8020/stranded",
        ),
    ] = None,
    as_json: JsonOption = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replay or divert although the flow's control state says it runs (only "
            "when no ferry run copies it)",
        ),
    ] = False,
) -> None:
    """List the records the source took after the flow's last replicated position that never
    reached the target (after an unplanned failover, once the source is back), then apply one
    policy. Exits 0 when nothing is stranded or the policy was applied, 3 when --report-only
    found stranded records, 1 on an error, 2 on wrong options."""
    from ferry.ops import reconcile_writes
    from ferry.ops.reconcile import plan_reconcile

    chosen = [
        name
        for name, on in (
            ("--report-only", report_only),
            ("--replay", replay),
            ("--divert", divert is not None),
            ("--export", export is not None),
        )
        if on
    ]
    if len(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --report-only, --replay, --divert TOPIC, --export DIR"
            + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if divert is not None and not divert.strip():
        raise typer.BadParameter("--divert needs a topic name")
    cfg = load(config)
    source, arrow, target = flow.partition("->")
    if not arrow or source not in cfg.clusters or target not in cfg.clusters or source == target:
        raise ConfigError(
            f"--flow '{flow}': write it as SOURCE->TARGET with two clusters of {config} "
            f"({', '.join(sorted(cfg.clusters))})"
        )
    flow_config = cfg.flow(source, target)
    if (replay or divert is not None) and not force:
        _refuse_while_copying(cfg, flow_config)
    plan = plan_reconcile(cfg, flow_config)
    applied: dict[str, Any] | None = None
    if replay:
        applied = reconcile_writes.replay(plan).as_json()
    elif divert is not None:
        applied = reconcile_writes.divert(plan, divert).as_json()
    elif export is not None:
        from ferry.audit.stranded_export import export_directory, export_stranded

        rows = export_stranded(cfg, plan, export)
        applied = {
            "action": "export",
            "written": rows,
            "directory": export_directory(plan, export),
        }
    if as_json:
        print(json.dumps({**plan.as_json(), "position": _POSITION, "applied": applied}))
    else:
        _print_plan(plan)
        if applied is not None:
            _print_applied(plan, applied)
    if report_only and plan.stranded:
        raise typer.Exit(3)


def _refuse_while_copying(cfg: FerryConfig, flow: FlowConfig) -> None:
    """--replay and --divert write the flow's position on the target: a `ferry run` copying
    the flow meanwhile would copy the stranded tail again, unmarked. Its control state says
    whether one may."""
    from ferry.control.log import recorded_control
    from ferry.flows.override import FlowControl

    control = recorded_control(cfg, flow.source, flow.target) or FlowControl()
    copying = control.copying(flow.name, flow.enabled)
    if copying is not None:
        raise FerryError(
            f"{copying}, and --replay or --divert must not run beside it; stop it first "
            f"(ferry flows pause -c CONFIG --flow '{flow.name}', or {flow.name}.enabled = "
            "false), or run again with --force if no ferry run copies it (nothing was written)"
        )


_POSITION = (
    "the flow's progress on the target (its group ferry-<source>-to-<target>), or the end of "
    "its offset runs on the target where those reach further"
)


def _print_plan(plan: ReconcilePlan) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    name, target = plan.flow.name, plan.flow.target
    out.print(
        Text(
            f"flow {name}: last replicated position = what {target} holds: the flow's progress "
            f"on {target} (group {plan.flow.progress_group}), or the end of its offset runs on "
            f"{target} where those reach further"
        )
    )
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("topic", "partition", "position", "from", "end", "stranded", "ranges", "origin"):
        numeric = column in ("partition", "position", "end", "stranded")
        table.add_column(column, justify="right" if numeric else "left", overflow="fold")
    for p in plan.partitions:
        if not p.count and not p.expired and not p.ahead and not p.from_target:
            continue
        ranges = [f"{r.first}-{r.last}" if r.first != r.last else str(r.first) for r in p.ranges]
        if len(ranges) > RANGES_SHOWN:
            ranges = [*ranges[:RANGES_SHOWN], f"(+{len(ranges) - RANGES_SHOWN} more)"]
        notes = []
        if p.expired:
            notes.append(f"{p.expired} offset(s) gone by retention")
        if p.ahead:
            notes.append(f"{target} holds {p.ahead} offset(s) past the end")
        if p.from_target:
            notes.append(f"{p.from_target} from {target}")
        origins = [f"{plan.flow.source} (own): {p.own}"] if p.own else []
        origins += [f"{o.alias} {o.topic}[{o.partition}]: {o.count}" for o in p.by_origin]
        cells = [
            p.topic,
            p.partition,
            p.start,
            plan.position_from[(p.topic, p.partition)],
            p.log_end,
            p.count,
            ", ".join(ranges + notes),
            ", ".join(origins),
        ]
        table.add_row(*(Text(str(c)) for c in cells))
    if table.rows:
        out.print(table)
    parts = len(plan.with_stranded())
    out.print(Text(f"stranded: {plan.stranded} record(s) in {parts} partition(s)"))
    point = plan.point
    if not plan.stranded:
        out.print(Text("recovery point when the source was lost: RPO 0 s (nothing stranded)"))
    elif point.rpo_ms is None:
        out.print(Text("recovery point when the source was lost: unknown (no timestamps)"))
    else:
        line = (
            f"recovery point when the source was lost: RPO {point.rpo_ms / 1000:.3f} s "
            f"(stranded records stamped {_time(point.oldest_ms)} to {_time(point.newest_ms)}"
        )
        if point.copied_until_ms is not None:
            line += (
                f"; {target} last received a record stamped {_time(point.copied_until_ms)}, "
                f"{(point.behind_ms or 0) / 1000:.3f} s after the oldest stranded one"
            )
        out.print(Text(line + ")"))


def _print_applied(plan: ReconcilePlan, applied: dict[str, Any]) -> None:
    from rich.text import Text

    target, name = plan.flow.target, plan.flow.name
    action = applied["action"]
    if action == "export":
        line = f"exported {applied['written']} record(s) to {applied['directory']}"
    else:
        where = ", ".join(applied["topics"]) or "nothing"
        verb = "replayed" if action == "replay" else "diverted"
        line = f"{verb} {applied['written']} record(s) into {where} on {target} (ferry.late=1)"
        if applied["already_there"]:
            line += f"; {applied['already_there']} were there already"
        line += (
            f"; flow {name}'s position on {target} moved to the source's end in "
            f"{applied['positions_moved']} partition(s)"
        )
    out.print(Text(line))


def _time(ms: int | None) -> str:
    if ms is None:
        return "?"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
