"""`ferry failover group|flow|spark-checkpoint` through the real command line: each subcommand
takes only its own options, and the old spelling (`ferry failover --group G ...`, `--flow A->B`,
`--spark-checkpoint DIR`) runs the same body with a one-line note on stderr naming the new
spelling. No broker: the bodies are recorded, not run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferry.cli import failover_commands, spark_checkpoint_command
from tests.ferry_cli import run_ferry

CONFIG = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _config(tmp_path: Path) -> str:
    path = tmp_path / "mm2.properties"
    path.write_text(CONFIG + f"A->B.enabled = true\nferry.state.dir = {tmp_path / 'state'}\n")
    return str(path)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """What each subcommand's body was asked to do (the config by its path)."""
    seen: list[tuple[Any, ...]] = []

    def record(kind: str) -> Any:
        def body(cfg: Any, *args: Any, **kwargs: Any) -> None:
            seen.append((kind, str(cfg.path), *args, *sorted(kwargs.items())))

        return body

    monkeypatch.setattr(failover_commands, "_failover_group", record("group"))
    monkeypatch.setattr(failover_commands, "_failover_flow", record("flow"))
    monkeypatch.setattr(
        spark_checkpoint_command, "spark_checkpoint_failover", record("spark-checkpoint")
    )
    return seen


def test_each_subcommand_reaches_its_body_with_its_options(
    tmp_path: Path, calls: list[tuple[Any, ...]]
) -> None:
    config = _config(tmp_path)
    group = run_ferry(
        "failover", "group", "-c", config, "billing [eu]", "--from", "A", "--to", "B",
        "--dry-run", "--by-timestamp",
    )  # fmt: skip
    flow = run_ferry("failover", "flow", "-c", config, "A->B", "--groups", "b.*", "--json")
    checkpoint = run_ferry(
        "failover", "spark-checkpoint", "-c", config, "/chk/q", "--from", "A", "--to", "B",
        "--sink-log", "/out/_spark_metadata",
    )  # fmt: skip
    for result in (group, flow, checkpoint):
        assert result.returncode == 0, result.stderr
        assert "note:" not in result.stderr  # the new spelling says nothing of the old
    assert calls == [
        ("group", config, "billing [eu]", "A", "B", True, False, False, True),
        ("flow", config, "A->B", "b.*", False, True, False),
        (
            "spark-checkpoint", config, "/chk/q", "A", "B",
            ("as_json", False), ("dry_run", False), ("sink_log", "/out/_spark_metadata"),
        ),
    ]  # fmt: skip


def test_a_subcommand_refuses_the_options_of_the_others(
    tmp_path: Path, calls: list[tuple[Any, ...]]
) -> None:
    config = _config(tmp_path)
    refused = {
        "--group": ("failover", "flow", "-c", config, "A->B", "--group", "g"),
        "--by-timestamp": ("failover", "flow", "-c", config, "A->B", "--by-timestamp"),
        "--groups": ("failover", "group", "-c", config, "g", "--from", "A", "--to", "B",
                     "--groups", "x"),
        "--sink-log": ("failover", "group", "-c", config, "g", "--from", "A", "--to", "B",
                       "--sink-log", "x"),
        "--from-checkpoints": ("failover", "spark-checkpoint", "-c", config, "/chk", "--from",
                               "A", "--to", "B", "--from-checkpoints"),
    }  # fmt: skip
    for option, args in refused.items():
        result = run_ferry(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert f"No such option: {option}" in result.stderr, result.stderr
    missing = run_ferry("failover", "spark-checkpoint", "-c", config, "/chk", "--from", "A")
    assert missing.returncode == 2 and "Missing option '--to'" in missing.stderr
    before = run_ferry("failover", "-c", config, "--json", "flow", "A->B")
    assert before.returncode == 2
    assert "--config, --json go after the subcommand: ferry failover flow" in before.stderr
    assert calls == []


def test_a_bad_groups_regex_is_refused_before_any_cluster_is_asked(tmp_path: Path) -> None:
    result = run_ferry("failover", "flow", "-c", _config(tmp_path), "A->B", "--groups", "orders(")
    assert result.returncode == 1
    assert "--groups orders(: not a regular expression" in result.stderr


def test_the_old_spelling_runs_the_same_body_and_names_the_new_one(
    tmp_path: Path, calls: list[tuple[Any, ...]]
) -> None:
    config = _config(tmp_path)
    old_and_new = [
        (
            ("-c", config, "--group", "billing [eu]", "--from", "A", "--to", "B", "--dry-run"),
            f"ferry failover group -c {config} 'billing [eu]' --from A --to B --dry-run",
        ),
        (
            ("--flow", "A->B", "-c", config, "--groups", "b.*", "--json", "--from-checkpoints"),
            f"ferry failover flow -c {config} 'A->B' --groups 'b.*' --from-checkpoints --json",
        ),
        (
            ("-c", config, "--spark-checkpoint", "/chk/q", "--from", "A", "--to", "B"),
            f"ferry failover spark-checkpoint -c {config} /chk/q --from A --to B",
        ),
    ]
    for old, new in old_and_new:
        result = run_ferry("failover", *old)
        assert result.returncode == 0, result.stderr
        notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
        assert len(notes) == 1, result.stderr
        assert "goes after this release" in notes[0] and notes[0].endswith(f": {new}"), notes
    assert [c[:3] for c in calls] == [
        ("group", config, "billing [eu]"),
        ("flow", config, "A->B"),
        ("spark-checkpoint", config, "/chk/q"),
    ]
    assert calls[0][3:] == ("A", "B", True, False, False, False)
    assert calls[1][3:] == ("b.*", False, True, True)


def test_the_old_spelling_keeps_its_checks_of_what_goes_together(
    tmp_path: Path, calls: list[tuple[Any, ...]]
) -> None:
    config = _config(tmp_path)
    refused = {
        "--flow names the clusters and the groups": ("--flow", "A->B", "--group", "g"),
        "give --group with --from and --to": ("--from", "A", "--to", "B"),
        "or --flow (with --groups)": ("--group", "g", "--from", "A", "--to", "B", "--groups", "x"),
        "--spark-checkpoint moves a Spark query": ("--spark-checkpoint", "/chk", "--group", "g"),
        "--spark-checkpoint needs --from and --to": ("--spark-checkpoint", "/chk"),
        "--sink-log goes with --spark-checkpoint": ("--sink-log", "/out", "--group", "g"),
    }
    for reason, args in refused.items():
        result = run_ferry("failover", "-c", config, *args)
        assert result.returncode == 2 and reason in result.stderr, (args, result.stderr)
        assert result.stderr.startswith("note: ferry failover"), result.stderr
    unnamed = run_ferry("failover", "-c", config, "--dry-run")
    assert "ferry failover group GROUP, ferry failover flow A->B" in unnamed.stderr
    assert calls == []


def test_a_name_that_reads_as_an_option_goes_last_after_a_double_dash(
    tmp_path: Path, calls: list[tuple[Any, ...]]
) -> None:
    config = _config(tmp_path)
    old = run_ferry("failover", "-c", config, "--group", "-orders", "--from", "A", "--to", "B")
    assert old.returncode == 0, old.stderr
    new = f"ferry failover group -c {config} --from A --to B -- -orders"
    assert old.stderr.splitlines()[0].endswith(f": {new}"), old.stderr
    again = run_ferry(
        "failover", "group", "-c", config, "--from", "A", "--to", "B", "--", "-orders"
    )
    assert again.returncode == 0, again.stderr
    assert calls[0] == calls[1] and calls[0][2] == "-orders"
