"""`ferry run` as a library call (`ferry.service.run`): what it refuses before anything starts
(no broker is reached, no Spark starts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.errors import ConfigError, FerryError
from ferry.service import FerryRun, RunOptions, run

SERVERS = "".join(f"{a}.bootstrap.servers = 127.0.0.1:{i}\n" for i, a in enumerate("ABC", 1))
IDENTITY = "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n"
DOUBLE_ROUTE = (
    "clusters = A, B, C\n" + SERVERS + IDENTITY + "A->B.enabled = true\nA->C.enabled = true\n"
    "C->B.enabled = true\nA->B.topics = orders\n"
)


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(text + f"ferry.state.dir = {tmp_path / 'state'}\n")
    return path


def test_a_graph_that_copies_twice_is_not_started(tmp_path: Path) -> None:
    path = _config(tmp_path, DOUBLE_ROUTE)
    notices: list[str] = []
    with pytest.raises(ConfigError) as caught:
        run(load_config(path), RunOptions(once=True), on_notice=notices.append)
    assert "not started: 1 route(s) would copy records twice or forever" in str(caught.value)
    assert "A's topic orders reaches B's topic orders twice" in str(caught.value)
    assert notices == []


def test_a_config_that_enables_no_flow_is_not_started(tmp_path: Path) -> None:
    path = _config(tmp_path, "clusters = A, B, C\n" + SERVERS)
    with pytest.raises(FerryError, match="enables no flow"):
        FerryRun(load_config(path)).run()


def test_the_options_default_to_a_continuous_run_without_api_or_metrics() -> None:
    assert RunOptions() == RunOptions(
        once=False, metrics_port=None, api_port=None, api_host="127.0.0.1"
    )
