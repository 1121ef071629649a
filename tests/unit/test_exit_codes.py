"""The exit codes table of docs/operations/commands.md is the code's: every code a command
exits with is in it, and the codes named by constants mean what the table says."""

from __future__ import annotations

import re
from pathlib import Path

from ferry.offsets.flow_failover import EXIT_SKIPPED
from ferry.ops.durability import EXIT_ERRORS, EXIT_WARNINGS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operations" / "commands.md"


def _table() -> dict[int, str]:
    text = PAGE.read_text()
    body = text.split("<!-- exit-codes:start -->")[1].split("<!-- exit-codes:end -->")[0]
    rows = [line.split("|")[1:3] for line in body.strip().splitlines()[2:]]
    return {int(code): meaning.strip() for code, meaning in rows}


def _codes_in_the_cli() -> set[int]:
    """Literal exit codes the command line raises or exits with."""
    found: set[int] = set()
    for path in (ROOT / "src" / "ferry" / "cli").glob("*.py"):
        for match in re.finditer(r"(?:typer\.Exit|sys\.exit)\((\d+)\)", path.read_text()):
            found.add(int(match.group(1)))
    return found


def test_every_code_the_commands_exit_with_is_in_the_table() -> None:
    table = _table()
    assert set(table) == {0, 1, 2, 3, 130}
    assert _codes_in_the_cli() <= set(table)


def test_the_codes_named_in_the_code_mean_what_the_table_says() -> None:
    table = _table()
    assert "ferry doctor" in table[EXIT_ERRORS] and "stops replication" in table[EXIT_ERRORS]
    assert "ferry doctor" in table[EXIT_WARNINGS] and "warnings" in table[EXIT_WARNINGS]
    assert "ferry failover flow" in table[EXIT_SKIPPED]
    assert "interrupted" in table[130]
