"""`ferry translate` and `ferry failover`: where a consumer group resumes on another cluster,
shown or committed."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.errors import FerryError
from ferry.terminal.console import err, out

__all__ = ["failover", "translate"]

GroupOption = Annotated[str, typer.Option("--group", "-g", help="Consumer group id")]
FromOption = Annotated[str, typer.Option("--from", help="Cluster alias the group leaves")]
ToOption = Annotated[str, typer.Option("--to", help="Cluster alias the group moves to")]
CheckpointsOption = Annotated[
    bool,
    typer.Option(
        "--from-checkpoints",
        help="Use the checkpoints in --to even if --from answers (as when it is lost)",
    ),
]


def translate(
    config: ConfigOption,
    group: GroupOption,
    from_alias: FromOption,
    to_alias: ToOption,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
) -> None:
    """Print where a consumer group would resume on another cluster, per partition."""
    from ferry.offsets.failover import plan_failover

    cfg = load(config)
    control = _recorded_control(cfg, from_alias, to_alias)
    plan = plan_failover(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    _print_plan(plan, as_json)


def _recorded_control(cfg: Any, from_alias: str, to_alias: str) -> Any:
    """What the API changed about the flow (topics added or removed), if it is recorded."""
    from ferry.control.log import recorded_control

    try:
        return recorded_control(cfg, from_alias, to_alias)
    except FerryError as exc:
        err.print(
            f"note: could not read the control state ({exc}); topics added or removed over "
            "the API count as the config file says"
        )
        return None


def failover(
    config: ConfigOption,
    group: GroupOption,
    from_alias: FromOption,
    to_alias: ToOption,
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
) -> None:
    """Commit a consumer group's translated offsets on another cluster (failover, failback)."""
    from ferry.offsets.failover import apply_failover, plan_failover, plan_failover_by_timestamp

    cfg = load(config)
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


def _print_plan(plan: Any, as_json: bool) -> None:
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
