"""`ferry translate`: where a consumer group would resume on another cluster;
`ferry translate --offsets`: offsets an application stores itself. `ferry failover`, which
commits them, lives in failover_commands and shares the plan's printing and the control state's
read from here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.errors import FerryError
from ferry.terminal.console import err, out

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig
    from ferry.flows.override import FlowControl
    from ferry.offsets.failover import FailoverPlan

__all__ = ["print_plan", "recorded_control", "translate"]

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
    control = recorded_control(cfg, from_alias, to_alias)
    plan = plan_failover(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    print_plan(plan, as_json)


def _translate_stored(
    cfg: FerryConfig, source: str, from_alias: str, to_alias: str, as_json: bool
) -> None:
    """One answer per input line, in order; exit 1 when any line could not be translated."""
    import sys
    from pathlib import Path

    from ferry.client import translate_stored_offsets
    from ferry.offsets.application_offsets import Untranslatable, parse_lines

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
        control = recorded_control(cfg, from_alias, to_alias, unreachable_target_fails=True)
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


def recorded_control(
    cfg: FerryConfig, from_alias: str, to_alias: str, *, unreachable_target_fails: bool = False
) -> FlowControl | None:
    """What the API changed about the flow (topics added or removed), if it is recorded.

    `unreachable_target_fails`: a `to` cluster that does not answer ends the command here
    (its runs cannot be read either), instead of a note and a second wait."""
    from ferry.control.log import recorded_control as read_control
    from ferry.errors import KafkaUnavailableError

    try:
        return read_control(cfg, from_alias, to_alias)
    except FerryError as exc:
        unreachable = isinstance(exc, KafkaUnavailableError) and exc.cluster == to_alias
        if unreachable and unreachable_target_fails:
            raise
        err.print(
            f"note: could not read the control state ({exc}); topics added or removed over "
            "the API count as the config file says"
        )
        return None


def print_plan(plan: FailoverPlan, as_json: bool) -> None:
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
