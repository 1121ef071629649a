"""`ferry audit`: every replicated topic compared with its copy, record by record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, load
from ferry.terminal.console import make_console, out

__all__ = ["audit"]


def audit(
    config: ConfigOption,
    flow: Annotated[
        str | None,
        typer.Option(
            help="Audit this flow only, e.g. A->B, or a chain of flows end to end, A->B->C "
            "(A->C finds the chain; default: every enabled flow)"
        ),
    ] = None,
    topics: Annotated[str, typer.Option(help="Source topics to audit (a regex)")] = ".*",
    since: Annotated[
        str | None,
        typer.Option(help="Records from this time on: ISO 8601, or a duration ago (2h)"),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(help="Records before this time: ISO 8601, or a duration ago (5m)"),
    ] = None,
    bucket: Annotated[str, typer.Option(help="Width of the time buckets (30s, 1m, 1h)")] = "1m",
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Write audit.json and audit.png (counts per bucket) here"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compare every replicated topic with its copy, record by record (by the ferry.origin
    header), as a Spark batch job: missing, duplicated, foreign, expired and in-flight
    records, per topic and time bucket. Exits 0 when nothing is missing, 3 when something is."""
    import time

    from ferry.audit import diff, report
    from ferry.audit.chain import chain_flows
    from ferry.audit.spark_job import audit_flows
    from ferry.errors import ConfigError

    cfg = load(config)
    try:
        bucket_ms = diff.parse_bucket(bucket)
        now_ms = int(time.time() * 1000)
        since_ms = None if since is None else diff.parse_time(since, now_ms)
        until_ms = None if until is None else diff.parse_time(until, now_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    chains = [[f] for f in cfg.enabled_flows] if flow is None else [chain_flows(cfg.flows, flow)]
    results = audit_flows(
        cfg, chains, topics=topics, bucket_ms=bucket_ms, since_ms=since_ms, until_ms=until_ms
    )
    document = report.to_json(results, bucket_ms)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "audit.json").write_text(json.dumps(document, indent=2) + "\n")
        report.chart(results, bucket_ms, out_dir / "audit.png")
    if as_json:
        print(json.dumps(document))
    else:
        _print_audit(results)
        if out_dir is not None:
            out.print(f"wrote {out_dir / 'audit.json'} and {out_dir / 'audit.png'}")
    if report.has_missing(results):
        raise typer.Exit(3)


def _print_audit(results: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    from ferry.audit import report

    for name, topics in results.items():
        table = Table(title=f"flow {name}", title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("topic", overflow="fold")
        for column in (*report.COUNTS, "complete", "delay p50 / p99"):
            table.add_column(column.replace("_", " "), justify="right", no_wrap=True)
        for row in report.table_rows(topics):
            table.add_row(*row)
        # Counts are never cut short: wider than a narrow terminal rather than elided.
        wide = make_console()
        wide.width = max(wide.width, 120)
        wide.print(table)
        for t in topics:
            for kind in ("missing", "duplicated", "foreign"):
                ranges = getattr(t, f"{kind}_ranges")
                if not ranges:
                    continue
                where = t.remote_topic if kind == "foreign" else t.topic
                shown = ", ".join(
                    f"{r['partition']}:{r['first']}-{r['last']} ({r['count']:,})" for r in ranges
                )
                more = " (more left off)" if t.ranges_truncated else ""
                out.print(f"  {kind} in {where} (partition:offsets): {shown}{more}")
