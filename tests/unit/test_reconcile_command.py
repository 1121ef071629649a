"""`ferry reconcile`'s options, refused before any cluster is asked (exit 2, or 1 for a flow
the config does not have)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ferry.cli.app import app


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(
        "clusters:\n"
        "  A: {bootstrap.servers: '127.0.0.1:1'}\n"
        "  B: {bootstrap.servers: '127.0.0.1:2'}\n"
        "A->B.enabled: true\n"
    )
    return path


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--report-only", "--replay"],
        ["--replay", "--export", "out"],
        ["--divert", " "],
    ],
)
def test_exactly_one_policy(config: Path, options: list[str]) -> None:
    result = CliRunner().invoke(app, ["reconcile", "-c", str(config), "--flow", "A->B", *options])
    assert result.exit_code == 2, result.output


@pytest.mark.parametrize("flow", ["A-B", "A->C", "A->A"])
def test_a_flow_of_two_clusters_of_the_config(config: Path, flow: str) -> None:
    result = CliRunner().invoke(
        app, ["reconcile", "-c", str(config), "--flow", flow, "--report-only"]
    )
    assert result.exit_code == 1
    assert f"--flow '{flow}'" in str(result.exception)


def test_a_source_that_does_not_answer_is_named(config: Path) -> None:
    result = CliRunner().invoke(
        app, ["reconcile", "-c", str(config), "--flow", "A->B", "--report-only"]
    )
    assert result.exit_code == 1
    assert "cluster A (127.0.0.1:1)" in str(result.exception)
