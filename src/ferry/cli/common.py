"""What the commands share: the --config option, loading the config, its notes and the
replication graph's check."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ferry.terminal.console import err, styled

if TYPE_CHECKING:
    from ferry.config.model import FerryConfig
    from ferry.graph.check import TopologyReport

__all__ = [
    "ConfigOption",
    "DirOption",
    "JsonOption",
    "MetricsHostOption",
    "check_topology",
    "load",
    "print_notes",
    "quoted",
]

ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="ferry.yaml or MM2 .properties")]
DirOption = Annotated[
    Path | None,
    typer.Option("--dir", help="Where clusters keep data and logs (default ./.ferry-local)"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
MetricsHostOption = Annotated[
    str,
    typer.Option(
        help="Where /metrics and /healthz listen (0.0.0.0: every interface, as a container "
        "needs for a scraper outside it)"
    ),
]


def load(path: Path) -> FerryConfig:
    """The config at `path`; librdkafka's lines about its clusters then name them by alias."""
    from ferry.config import load_config
    from ferry.kafka.log import name_clusters

    cfg = load_config(path)
    name_clusters({alias: c.bootstrap_servers for alias, c in cfg.clusters.items()})
    return cfg


def check_topology(cfg: FerryConfig, config: Path, command: str) -> TopologyReport:
    """Print the graph's warnings and errors; exit 1 if it has errors (see ferry.graph.check)."""
    from ferry.cli.topology_view import print_findings
    from ferry.graph.check import check_config

    report = check_config(cfg)
    print_findings(err, report, config)
    if not report.ok:
        err.print(
            f"{config}: not {command}: {len(report.errors)} route(s) above would copy records "
            f"twice or forever; change the flows' topics, topics.exclude or policy "
            f"(ferry topology -c {config} shows the graph)"
        )
        raise typer.Exit(1)
    return report


def print_notes(cfg: FerryConfig) -> None:
    for note in cfg.notes:
        err.print(styled(("note", "yellow"), f": {cfg.path}: {note}"))


def quoted(patterns: tuple[str, ...]) -> str:
    """A regex list as the user wrote it: each item quoted, nothing escaped."""
    return "[" + ", ".join(f"'{p}'" for p in patterns) + "]"
