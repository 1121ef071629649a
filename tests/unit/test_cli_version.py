"""`ferry --version`: the installed distribution's version, and nothing runs."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from ferry.cli.app import app


def test_version_prints_the_installed_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"ferry {version('ferry')}\n"


def test_version_wins_over_a_command() -> None:
    """Eager: `ferry --version run` prints the version rather than starting a run."""
    result = CliRunner().invoke(app, ["--version", "run", "-c", "/nonexistent.yaml"])
    assert result.exit_code == 0 and result.output.startswith("ferry "), result.output
