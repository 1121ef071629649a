"""`ferry switchover --flow A->B`: a planned switch of the writers from A to B, nothing lost
(the steps: ferry.flows.switchover; on the clusters: ferry.control.switchover)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.terminal.console import err, out

__all__ = ["switchover"]


def switchover(
    config: ConfigOption,
    flow: Annotated[str, typer.Option("--flow", help="The flow to switch over, as A->B")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; change nothing")
    ] = False,
    as_json: JsonOption = False,
    writers_stopped: Annotated[
        bool,
        typer.Option(
            "--writers-stopped",
            help="The writers of A's topics are stopped: no fence (needed where A has no "
            "ACL authorizer)",
        ),
    ] = False,
    rollback: Annotated[
        bool,
        typer.Option(
            "--rollback", help="Take an unfinished switchover's fence back; A->B copies on"
        ),
    ] = False,
    deadline: Annotated[
        float,
        typer.Option("--deadline", help="Seconds to wait for the flow to reach lag 0"),
    ] = 300.0,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Go on although the switchover's record names another process at work on "
            "it (only when that process is gone)",
        ),
    ] = False,
) -> None:
    """Switch a flow A->B over with nothing lost: fence A's writers, wait for lag 0, commit
    the groups on B, then stop A->B and start B->A in the running ferry run. Run again to
    resume one cut short; --flow B->A switches back."""
    from ferry.control.switchover import SwitchoverOptions
    from ferry.control.switchover import switchover as switch

    cfg = load(config)
    options = SwitchoverOptions(
        dry_run=dry_run,
        writers_stopped=writers_stopped,
        rollback=rollback,
        deadline=deadline,
        force=force,
    )
    say = err.print if as_json else out.print
    report = switch(cfg, flow, options, say=say)
    if as_json:
        print(json.dumps(report.as_json(), indent=2))
        raise typer.Exit(report.exit_code)
    if report.action == "refuse":
        err.print(f"not switched over: {report.sentence}")
        raise typer.Exit(1)
    if report.action == "dry_run":
        out.print(f"dry run: {flow}: would do {', '.join(report.planned) or 'nothing'}")
        for acl in report.fence:
            out.print(f"  would create: DENY WRITE for {acl.principal} on {acl.topic}")
        if report.sentence:
            out.print(f"  but: {report.sentence}")
        return
    if report.action == "rollback":
        out.print(f"{flow}: rolled back")
        return
    if report.sentence:
        out.print(report.sentence)
    if report.record is not None:
        for step, started, ended in report.record.steps:
            out.print(f"  {step}: {ended - started:.1f} s")
    for topic in report.proof:
        out.print(
            f"  {topic.topic}: {topic.records} record(s) in the window on the source, "
            f"{topic.copies} copie(s) on the target, {topic.missing} missing, "
            f"{topic.duplicates} duplicate(s)"
        )
    for notice in report.notices:
        err.print(f"note: {notice}")
    if report.exit_code:
        raise typer.Exit(report.exit_code)
    out.print(f"switched over: {flow} is stopped, its reverse runs")
