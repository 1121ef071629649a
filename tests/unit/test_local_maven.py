"""Fetching jars with Maven: what the operator is told when Maven cannot do it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local.maven import copy_dependencies, is_complete


def test_without_maven_on_path_the_error_names_what_was_to_be_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(LocalClusterError, match="Maven \\(mvn\\) is not on PATH") as info:
        copy_dependencies(
            tmp_path / "home", "kafka-runtime.pom.xml", "the jars X", "1", [], quiet=True
        )
    assert "the jars X" in str(info.value)
    assert not is_complete(tmp_path / "home")


def test_a_failed_maven_run_leaves_nothing_taken_for_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text("#!/bin/sh\necho 'could not resolve artifact' >&2\nexit 3\n")
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    home = tmp_path / "home"
    with pytest.raises(LocalClusterError) as info:
        copy_dependencies(home, "kafka-runtime.pom.xml", "the jars Y", "1", [], quiet=True)
    message = str(info.value)
    assert "could not fetch the jars Y" in message
    assert "mvn exit 3" in message
    assert "could not resolve artifact" in message
    assert not is_complete(home)
    assert not (home / "libs").exists()
    assert list(home.iterdir()) == []  # the staging folder is gone too
