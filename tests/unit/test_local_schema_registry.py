"""`ferry local`'s registries: the state file, and a pid that is not the registry any more."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ferry.local.schema_registry import RegistryProcess, read_registries, stop_registries


def test_a_recycled_pid_is_not_the_registry_and_is_never_signalled(tmp_path: Path) -> None:
    # This test's own pid: running, but not a registry on that port. Stopping must not kill it.
    registry = RegistryProcess("A", os.getpid(), 18081, str(tmp_path / "A-registry"))
    assert registry.url == "http://127.0.0.1:18081/apis/ccompat/v7"
    assert not registry.is_running()
    registry.stop()  # returns at once: nothing to stop
    assert registry.to_json()["url"] == registry.url
    assert RegistryProcess.from_json(registry.to_json()) == registry


def test_down_stops_only_what_the_state_file_names(tmp_path: Path) -> None:
    (tmp_path / "A-registry").mkdir()
    entry = RegistryProcess("A", os.getpid(), 18081, str(tmp_path / "A-registry")).to_json()
    (tmp_path / "registries.json").write_text(json.dumps({"A": entry}))
    assert list(read_registries(tmp_path)) == ["A"]
    assert stop_registries(tmp_path) == []  # its pid is no registry: nothing was stopped
    assert not (tmp_path / "registries.json").exists()
    assert read_registries(tmp_path) == {}


def test_restarting_a_registry_not_recorded_is_refused(tmp_path: Path) -> None:
    import pytest

    from ferry.errors import LocalClusterError
    from ferry.local.schema_registry import restart_registry

    with pytest.raises(LocalClusterError, match="no schema registry of A"):
        restart_registry(tmp_path, "A")
