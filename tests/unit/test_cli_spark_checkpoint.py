"""`ferry failover spark-checkpoint` through the real command line: the argument reaches the
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
    args = ["failover", "spark-checkpoint", "-c", str(_config(tmp_path)), str(checkpoint)]
    result = run_ferry(*args, "--from", "A", "--to", "B")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "offsets/2: no source of this query is Kafka" in result.stderr
    assert (checkpoint / "offsets" / "2").read_bytes() == planned
    assert not (checkpoint / "ferry-backup").exists()
