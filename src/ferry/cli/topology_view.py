"""What `ferry topology` shows: the replication graph as tables, and as a PNG drawing.

User strings (aliases, regexes, messages) go into `Text`, never through markup.
"""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ferry.config.model import FerryConfig
from ferry.graph.check import TopologyReport, policy_label
from ferry.terminal.console import styled

__all__ = ["draw_png", "print_findings", "print_graph"]


def print_findings(console: Console, report: TopologyReport, where: object) -> None:
    """Each warning and error on a line of its own, prefixed as other messages are."""
    for finding in report.warnings:
        console.print(styled(("warning", "yellow"), f": {where}: {finding.message}"))
    for finding in report.errors:
        console.print(styled(("error", "bold red"), f": {where}: {finding.message}"))


def print_graph(console: Console, cfg: FerryConfig) -> None:
    clusters = Table(title="clusters", title_justify="left")
    for column in ("cluster", "bootstrap servers", "flows out", "flows in"):
        clusters.add_column(column)
    enabled = cfg.enabled_flows
    for alias, cluster in cfg.clusters.items():
        out = ", ".join(f.target for f in enabled if f.source == alias) or "-"
        into = ", ".join(f.source for f in enabled if f.target == alias) or "-"
        clusters.add_row(Text(alias), Text(cluster.bootstrap_servers), Text(out), Text(into))
    console.print(clusters)
    flows = Table(title="enabled flows", title_justify="left")
    for column in ("flow", "policy", "topics", "topics.exclude"):
        flows.add_column(column)
    for flow in enabled:
        flows.add_row(
            Text(flow.name),
            Text(policy_label(flow)),
            Text(", ".join(flow.topics)),
            Text(", ".join(flow.topics_exclude)),
        )
    console.print(flows)
    disabled = [f.name for f in cfg.flows if not f.enabled]
    if disabled:
        console.print(Text(f"disabled flows: {', '.join(disabled)}"))


def _positions(aliases: list[str]) -> dict[str, tuple[float, float]]:
    """Clusters on a circle, the first at the top, clockwise."""
    count = len(aliases)
    return {
        alias: (math.sin(2 * math.pi * i / count), math.cos(2 * math.pi * i / count))
        for i, alias in enumerate(aliases)
    }


def draw_png(cfg: FerryConfig, report: TopologyReport, path: Path) -> None:
    """Clusters as circles, enabled flows as arrows labelled with their policy; flows on a
    refused route in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    aliases = list(cfg.clusters)
    where = _positions(aliases) if len(aliases) > 1 else {aliases[0]: (0.0, 0.0)}
    flagged = {
        (a, b)
        for f in report.errors
        for route in f.routes
        for a, b in zip(route.clusters, route.clusters[1:], strict=False)
    }
    fig, ax = plt.subplots(figsize=(6, 6), dpi=100)
    try:
        ax.set_xlim(-1.6, 1.6)
        ax.set_ylim(-1.6, 1.6)
        ax.set_aspect("equal")
        ax.axis("off")
        for flow in cfg.enabled_flows:
            bad = (flow.source, flow.target) in flagged
            start, end = where[flow.source], where[flow.target]
            arrow = FancyArrowPatch(
                start,
                end,
                connectionstyle="arc3,rad=0.15",
                arrowstyle="-|>",
                mutation_scale=18,
                shrinkA=28,
                shrinkB=28,
                color="tab:red" if bad else "tab:blue",
                linewidth=2,
            )
            ax.add_patch(arrow)
            mid_x = (start[0] + end[0]) / 2 + (end[1] - start[1]) * 0.12
            mid_y = (start[1] + end[1]) / 2 - (end[0] - start[0]) * 0.12
            ax.text(mid_x, mid_y, policy_label(flow), fontsize=8, ha="center", va="center")
        for alias, (x, y) in where.items():
            ax.scatter([x], [y], s=1600, color="white", edgecolors="black", zorder=3)
            ax.text(x, y, alias, ha="center", va="center", fontsize=11, zorder=4)
        title = "ferry topology" + (f": {len(report.errors)} error(s)" if report.errors else "")
        ax.set_title(title)
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
