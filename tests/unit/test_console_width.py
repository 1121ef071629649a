"""Off a terminal (a pipe, a log, a test's capture) ferry's tables keep every name whole."""

from __future__ import annotations

import pytest
from rich.table import Table

from ferry.terminal.console import make_console, rule, styled


def test_a_table_off_a_terminal_keeps_the_longest_topic_name_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    console = make_console()
    topic = "orders." + "x" * 242  # Kafka's longest topic name: 249 characters
    table = Table()
    for column in ("topic", "partition", "source end", "replicated", "lag"):
        table.add_column(column)
    table.add_row(topic, "0", "10", "9", "1")
    with console.capture() as captured:
        console.print(table)
        rule(console, styled(("heading", "bold")))
    text = captured.get()
    assert topic in text and "…" not in text
    assert max(len(line) for line in text.splitlines() if "heading" in line) <= 80


def test_columns_in_the_environment_set_the_width_when_printing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    console = make_console()
    assert console.width == 60
    monkeypatch.setenv("COLUMNS", "200")  # set after the console was made, as a runner does
    assert console.width == 200
