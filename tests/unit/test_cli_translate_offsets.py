"""`ferry translate --offsets`: lines read from stdin or a file, one answer per line, the
table printing user strings verbatim, the exit code counting the lines that failed.

The clusters here do not answer: lines that do not parse never need one.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from ferry.cli.app import app
from ferry.cli.offsets_commands import _print_stored
from ferry.offsets.application_offsets import Translated, parse_line
from ferry.terminal.console import out
from tests.ferry_cli import run_ferry

CONFIG = (
    "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
    "A->B.enabled: true\n"
)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(CONFIG)
    return path


def test_lines_from_stdin_get_one_json_answer_each_in_order_and_exit_1(tmp_path: Path) -> None:
    lines = '{"topic": "orders", "partition": 0}\n\nnot json\n[1]\n'
    result = CliRunner().invoke(
        app,
        [
            "translate",
            "-c",
            str(_config(tmp_path)),
            "--offsets",
            "-",
            "--from",
            "A",
            "--to",
            "B",
            "--json",
        ],
        input=lines,
    )
    assert result.exit_code == 1
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [a["error"].split(":")[0] for a in answers] == ["line 1", "line 3", "line 4"]
    assert answers[0] == {"topic": "orders", "partition": 0, "error": 'line 1: no field "offset"'}
    assert answers[1]["input"] == "not json"
    assert "3 of 3 offset(s) could not be translated" in result.output


def test_group_and_offsets_exclude_each_other_and_one_is_needed(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    both = run_ferry(
        "translate", "-c", config, "-g", "g", "--offsets", "-", "--from", "A", "--to", "B"
    )
    neither = run_ferry("translate", "-c", config, "--from", "A", "--to", "B")
    assert both.returncode == 2 and "leave out --group" in both.stderr
    assert neither.returncode == 2 and "give --group" in neither.stderr


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no [such] file.jsonl"
    result = run_ferry(
        "translate", "-c", str(_config(tmp_path)), "--offsets", str(missing), "--from", "A",
        "--to", "B",
    )  # fmt: skip
    assert result.returncode == 1
    assert f"--offsets {missing}: cannot read it" in result.stderr


def test_the_table_prints_topics_and_errors_verbatim() -> None:
    answers = [
        Translated("[bold]orders", 3, 1234, "A.[bold]orders", 3, 1200, "A->B", "gap"),
        parse_line(2, "[red]oops"),
    ]
    width = out.width
    out.width = 200  # a wide terminal: no cell wraps
    try:
        with out.capture() as captured:
            _print_stored(answers, "A", "B")
    finally:
        out.width = width
    text = captured.get()
    assert "[bold]orders" in text and "A.[bold]orders" in text
    assert "1234" in text and "1200" in text and "A->B (gap)" in text
    assert "error: line 2: not JSON" in text


def test_a_target_that_does_not_answer_ends_the_command_naming_it(tmp_path: Path) -> None:
    line = '{"topic": "orders", "partition": 0, "offset": 5}\n'
    offsets = tmp_path / "offsets.jsonl"
    offsets.write_text(line)
    result = run_ferry(
        "translate", "-c", str(_config(tmp_path)), "--offsets", str(offsets), "--from", "A",
        "--to", "B", "--json",
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: cluster B (127.0.0.1:2) is unreachable")
