"""`ferry validate` and `ferry topology`: what a config says, and the graph its flows make."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ferry.cli.common import ConfigOption, check_topology, load, print_notes, quoted
from ferry.secrets import HIDDEN
from ferry.terminal.console import err, out, styled

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig

__all__ = ["topology", "validate"]


def validate(config: ConfigOption) -> None:
    """Check a config file and print what ferry will do with it."""
    cfg = load(config)
    for key in cfg.ignored_keys:
        err.print(
            styled(
                ("note", "yellow"),
                f": {config}: key '{key}' only matters to MirrorMaker, "
                "Kafka Connect or Java clients; ignored",
            )
        )
    print_notes(cfg)
    check_topology(cfg, config, "valid")
    out.print(f"{config}: valid")
    out.print(
        f"  clusters: {', '.join(f'{a} ({c.bootstrap_servers})' for a, c in cfg.clusters.items())}"
    )
    for flow in cfg.flows:
        state = "enabled" if flow.enabled else "disabled"
        topics = quoted(flow.topics)
        out.print(
            f"  flow {flow.name}: {state}, policy {flow.policy.kind}, topics {topics}, "
            f"exactly-once {'on' if flow.exactly_once else 'off'}"
        )
    out.print(f"  state dir: {cfg.state_dir}")
    if cfg.secrets:
        sources = (
            f"{key} ({', '.join(refs) if refs else 'in the file'})"
            for key, refs in sorted(cfg.secrets.items())
        )
        out.print(f"  secrets (printed as {HIDDEN}): {', '.join(sources)}")
    _print_control_state(cfg)


def _print_control_state(cfg: FerryConfig) -> None:
    """What the API changed (topics, pause), as the control topics keep it for the next start."""
    from ferry.control.controller import describe
    from ferry.control.log import recorded_controls

    for kept in recorded_controls(cfg, timeout=5):
        if kept.error is not None:
            err.print(f"note: could not read the control state ({kept.where}): {kept.error}")
            continue
        if not kept.changed:
            out.print(f"  control state ({kept.where}): no change made over the API")
        for name, control in sorted(kept.changed.items()):
            out.print(f"  control state ({kept.where}): flow {name}: {describe(control)}")


def topology(
    config: ConfigOption,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw the graph into this PNG file")
    ] = None,
) -> None:
    """Print the replication graph (clusters, flows, policies, topics) with its warnings and
    errors; exits 1 if a route would copy records twice or forever."""
    from ferry.cli.topology_view import draw_png, print_findings, print_graph
    from ferry.graph.check import check_config

    cfg = load(config)
    report = check_config(cfg)
    print_graph(out, cfg)
    print_findings(err, report, config)
    if png is not None:
        draw_png(cfg, report, png)
        out.print(f"drawn: {png}")
    out.print(f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)")
    if not report.ok:
        raise typer.Exit(1)
