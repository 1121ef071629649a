"""`ferry run`: parse its options, say what starts, show progress, print the summary. The run
itself is `ferry.service.run`."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ferry.cli.common import ConfigOption, MetricsHostOption, check_topology, load, print_notes
from ferry.terminal.console import err, out

__all__ = ["run"]


def run(
    config: ConfigOption,
    once: Annotated[
        bool,
        typer.Option("--once", help="Copy everything available at start, then exit 0"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Serve Prometheus /metrics and /healthz on PORT (0: any)"),
    ] = None,
    metrics_host: MetricsHostOption = "127.0.0.1",
    api_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the control API (topics, pause, failover) and its web console on PORT "
            "(0: any)"
        ),
    ] = None,
    api_host: Annotated[
        str, typer.Option(help="Where the API listens; not loopback only with a token")
    ] = "127.0.0.1",
) -> None:
    """Replicate every enabled flow until stopped: a continuous copy in leases by default
    (ferry.lease.seconds = 0: bounded micro-batches)."""
    from ferry.service import RunOptions
    from ferry.service import run as run_flows
    from ferry.terminal.progress_view import ProgressView, summary_table

    cfg = load(config)
    print_notes(cfg)
    check_topology(cfg, config, "started")
    for flow in cfg.enabled_flows:
        err.print(
            f"flow {flow.name}: {cfg.clusters[flow.source].bootstrap_servers} -> "
            f"{cfg.clusters[flow.target].bootstrap_servers}"
        )

    def api_serving(url: str) -> None:
        err.print(f"API on {url} (OpenAPI document: {url}/openapi.json); web console: {url}/")

    options = RunOptions(
        once=once,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        api_port=api_port,
        api_host=api_host,
    )
    with ProgressView(err) as view:
        flows = run_flows(
            cfg, options, on_notice=err.print, on_progress=view.update, on_api=api_serving
        )
    if as_json:
        print(
            json.dumps(
                {
                    p.name: {
                        "records": p.records,
                        "bytes": p.bytes,
                        "skipped": p.skipped,
                        "seconds": round(p.seconds, 3),
                        "copier": p.copier,
                    }
                    for p in flows
                }
            )
        )
    else:
        out.print(summary_table(flows))
