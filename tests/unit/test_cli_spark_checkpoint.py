"""`ferry failover --spark-checkpoint` through the real command line: the option reaches the
checkpoint rewrite, and a checkpoint ferry cannot move is refused naming the file, unchanged."""

from __future__ import annotations

from pathlib import Path

from tests.ferry_cli import run_ferry

CONFIG = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(CONFIG + f"A->B.enabled = true\nferry.state.dir = {tmp_path / 'state'}\n")
    return path


def test_a_checkpoint_of_another_source_is_refused_naming_the_file(tmp_path: Path) -> None:
    checkpoint = tmp_path / "query checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    planned = b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"logOffset":2}'
    (checkpoint / "offsets" / "2").write_bytes(planned)
    (checkpoint / "commits" / "2").write_bytes(b'v1\n{"nextBatchWatermarkMs":0}')
    args = ["failover", "-c", str(_config(tmp_path)), "--spark-checkpoint", str(checkpoint)]
    result = run_ferry(*args, "--from", "A", "--to", "B")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "offsets/2: no source of this query is Kafka" in result.stderr
    assert (checkpoint / "offsets" / "2").read_bytes() == planned
    assert not (checkpoint / "ferry-backup").exists()


def test_the_options_that_move_a_group_do_not_go_with_a_checkpoint(tmp_path: Path) -> None:
    config = str(_config(tmp_path))
    both = run_ferry("failover", "-c", config, "--spark-checkpoint", str(tmp_path), "--group", "g")
    assert both.returncode == 2 and "--spark-checkpoint moves a Spark query" in both.stderr
    clusters = run_ferry("failover", "-c", config, "--spark-checkpoint", str(tmp_path))
    assert clusters.returncode == 2 and "needs --from and --to" in clusters.stderr
    alone = run_ferry("failover", "-c", config, "--sink-log", str(tmp_path), "--group", "g")
    assert alone.returncode == 2 and "--sink-log goes with --spark-checkpoint" in alone.stderr
