"""`ferry status`, `ferry doctor` and `ferry monitor`: how replication is doing, read from the
clusters."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from ferry.cli.common import ConfigOption, JsonOption, MetricsHostOption, load
from ferry.errors import FerryError
from ferry.terminal.console import err, out

__all__ = ["doctor", "monitor", "status"]


def status(config: ConfigOption, as_json: JsonOption = False) -> None:
    """Per flow, read from the clusters: heartbeat latency, replicated position and lag per
    partition; records and bytes copied by this machine. Exits 1 if a cluster does not answer, a
    flow is behind while its target cannot take writes (below min.insync.replicas), or a
    partition holds because a schema registry does not answer."""

    from ferry.ops.status import flow_status

    cfg = load(config)
    flows = [flow_status(cfg, flow) for flow in cfg.enabled_flows]
    if as_json:
        print(json.dumps({"flows": {f.flow: f.to_json() for f in flows}}))
    else:
        _print_status(flows)
    if any(f.errors for f in flows):
        raise typer.Exit(1)  # a cluster did not answer (figures missing), or a copy is stuck


def _print_status(flows: list[Any]) -> None:
    from rich.table import Table

    for f in flows:
        if f.latency_ms is None:
            latency = "no heartbeat yet"
        elif f.latency_from == "copies":  # no heartbeats: the latest copies' own latency
            latency = f"{f.latency_ms} ms (of the latest copies)"
        else:
            latency = f"{f.latency_ms} ms"
        lag = "unknown" if f.lag is None else f"{f.lag:,}"
        rpo = "unknown" if f.rpo_seconds is None else f"{f.rpo_seconds:,.1f} s"
        table = Table(
            title=f"flow {f.flow}: latency {latency}, lag {lag}, RPO {rpo}, "
            f"copied {f.records:,} records ({f.bytes:,} bytes)"
            + (f", {f.lost:,} lost before copy" if f.lost else ""),
            title_justify="left",
        )
        columns = ["topic", "partition", "source end", "replicated", "lag", "RPO (s)"]
        if f.lost:  # records the source removed before ferry copied them
            columns.append("lost before copy")
        for column in columns:
            table.add_column(column, justify="left" if column == "topic" else "right")
        for p in f.partitions:
            row = [
                p.topic,
                str(p.partition),
                str(p.source_end),
                str(p.replicated),
                str(p.lag),
                "unknown" if p.rpo_seconds is None else f"{p.rpo_seconds:.1f}",
            ]
            if f.lost:
                row.append(f"{p.lost:,} ({p.lost_offsets})" if p.lost else "0")
            table.add_row(*row)
        out.print(table)
        if f.lost:
            out.print(
                f"  {f.lost:,} record(s) were removed from {f.flow.split('->')[0]} by retention "
                "or deletion before ferry copied them: they are not on the target"
            )
        for name, e in f.executors.items():
            out.print(
                f"  executor {name} on {e['host']}: {len(e['partitions'])} partitions now, "
                f"{e['records_per_second']:,.0f} records/s, {e['records']:,} records copied"
            )
        if f.spark_ui:
            out.print(f"  Spark UI: {f.spark_ui}")
        for error in f.errors:
            err.print(f"flow {f.flow}: {error}")


def doctor(config: ConfigOption, as_json: JsonOption = False) -> None:
    """Check what would stop or weaken replication: a target that cannot keep what it
    acknowledged (replicas, ISR, producer) and each ACL ferry's principal lacks on a flow's
    source or target, and, as notes, the optional capabilities (ferry switchover, ferry
    reconcile --replay) it lacks. Exits 0 when nothing stops or weakens replication (notes do
    not count), 1 when a finding stops it (an error), 2 when findings only weaken it
    (warnings), so it can gate a deploy."""
    from ferry.ops.doctor import diagnose
    from ferry.ops.durability import exit_code

    findings = diagnose(load(config))
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    notes = [f for f in findings if f.severity == "note"]
    if as_json:
        kinds = (("errors", errors), ("warnings", warnings), ("notes", notes))
        print(json.dumps({k: [f.to_json() for f in v] for k, v in kinds}))
    else:
        for f in errors + warnings + notes:
            where = f"cluster {f.cluster}" + (f", topic {f.topic}" if f.topic else "")
            line = f"{f.severity}: {where}: {f.detail} [{f.kind}]"
            out.print(line, highlight=False, markup=False)
        out.print(f"{len(errors)} error(s), {len(warnings)} warning(s), {len(notes)} note(s)")
    code = exit_code(findings)
    if code:
        raise typer.Exit(code)


def monitor(
    config: ConfigOption,
    metrics_port: Annotated[
        int,
        typer.Option(help="Serve /metrics and /healthz on PORT; 0 = any free port"),
    ] = 9464,
    metrics_host: MetricsHostOption = "127.0.0.1",
    webhook: Annotated[
        str | None,
        typer.Option(help="POST each alert and recovery as JSON to this http(s) URL"),
    ] = None,
    once: Annotated[
        bool,
        typer.Option("--once", help="Sample every flow once, print the offsets, exit"),
    ] = False,
) -> None:
    """Watch every enabled flow for sync delay (sliding-window rule); serve Prometheus metrics."""
    from ferry.monitor import service

    cfg = load(config)
    if once:
        failed = False
        for flow, sample in service.sample_once(cfg):
            if isinstance(sample, FerryError):
                err.print(f"flow {flow.name}: {sample}", highlight=False, markup=False)
                failed = True
                continue
            if not sample.pairs:
                out.print(f"flow {flow.name}: no replicated topic", highlight=False)
            for p in sample.pairs:
                group = f" group {p.group}" if p.group is not None else ""
                out.print(
                    f"flow {flow.name} {p.kind.value}{group} {p.topic} partition {p.partition}: "
                    f"{flow.source} {p.a}, {flow.target} {p.b} ({p.remote_topic})",
                    highlight=False,
                    markup=False,
                )
        if failed:
            raise typer.Exit(1)
        return

    def ready(port: int) -> None:
        url = f"http://{metrics_host}:{port}"
        print(f"metrics: {url}/metrics  health: {url}/healthz")
        sys.stdout.flush()

    try:
        service.serve(
            cfg, port=metrics_port, host=metrics_host, webhook_url=webhook, on_ready=ready
        )
    except KeyboardInterrupt:  # a second Ctrl-C while a sample was waiting on a cluster
        err.print("interrupted")
        raise typer.Exit(130) from None
