"""The command line prints what the user wrote, character for character (the real CLI).

Topic regexes are full of brackets; none of them may be read as console markup, dropped, or
crash the printing of the very error that names them. The first test runs the `ferry` entry
point as its own process (`python -m ferry`); the rest run it in this process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ferry_cli import FerryResult, run_ferry, run_ferry_process

CLUSTERS = (
    "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
)


def _config(tmp_path: Path, topics: str) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(CLUSTERS + f"A->B:\n  enabled: true\n  topics: {topics}\n")
    return path


def _validate(tmp_path: Path, topics: str) -> FerryResult:
    return run_ferry("validate", "-c", str(_config(tmp_path, topics)))


def test_validate_shows_regexes_with_brackets_and_commas_verbatim(tmp_path: Path) -> None:
    config = _config(tmp_path, "['orders-[a-z]+', 'orders-\\d{1,3}', '[/x]']")
    result = run_ferry_process("validate", "-c", str(config), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "topics ['orders-[a-z]+', 'orders-\\d{1,3}', '[/x]']" in result.stdout


@pytest.mark.parametrize("regex", ["orders[/x](", "orders-[a-z]+(", "[bold red]orders("])
def test_an_invalid_regex_is_named_verbatim_in_one_error_line(tmp_path: Path, regex: str) -> None:
    result = _validate(tmp_path, f"['{regex}']")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"'{regex}' is not a valid regular expression" in result.stderr
    assert result.stderr.startswith("error: ")
