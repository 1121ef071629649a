"""What `ferry run` shows: a live table per flow on a terminal, and a summary at the end."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ferry.engine.runner import FlowProgress

__all__ = ["ProgressView", "summary_table"]


def _table(flows: list[FlowProgress], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("flow", "records", "MB", "records/s", "MB/s", "lag", "seconds"):
        table.add_column(column, justify="left" if column == "flow" else "right")
    for p in flows:
        table.add_row(
            p.name,
            f"{p.records:,}",
            f"{p.bytes / 1e6:,.1f}",
            f"{p.records_per_second:,.0f}",
            f"{p.mb_per_second:,.1f}",
            f"{p.lag:,}",
            f"{p.seconds:,.1f}",
        )
    return table


def summary_table(flows: list[FlowProgress]) -> Table:
    """Records, bytes and average rates per flow over the whole run."""
    for p in flows:
        if p.seconds > 0:
            p.records_per_second = p.records / p.seconds
            p.mb_per_second = p.bytes / p.seconds / 1e6
    return _table(flows, "copied")


class ProgressView:
    """A rich Live table on a terminal; nothing on a pipe (logs get the summary only)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._live: Any = None

    def __enter__(self) -> ProgressView:
        if self._console.is_terminal:
            self._live = Live(console=self._console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def update(self, flows: list[FlowProgress]) -> None:
        if self._live is not None:
            self._live.update(_table(flows, "ferry run (Ctrl-C stops after the current batch)"))

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
