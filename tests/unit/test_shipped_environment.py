"""What ferry ships to a cluster's executors, when, and what a worker that cannot run it says."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.engine.spark import cluster, python_workers
from ferry.engine.spark.environment import (
    MARKER_FILE,
    PLATFORM_ERROR_PREFIX,
    PYTHON_IN_ARCHIVE,
    Platform,
    archive_key,
    is_local_master,
    mismatch,
    missing_python,
    requirement_name,
    runtime_closure,
    ships_environment,
)
from ferry.errors import error_from_text
from ferry.local.spark import SparkCluster, SparkProcess, read_state

HERE = Platform("Linux", "x86_64", "3.11", "glibc 2.36")


def test_a_worker_like_the_build_machine_runs_the_archive() -> None:
    assert mismatch(HERE, HERE) is None
    assert mismatch(HERE, Platform("Linux", "x86_64", "3.11", "glibc 2.39")) is None  # newer libc
    assert mismatch(HERE, Platform("Linux", "x86_64", "3.11", "")) is None  # libc unknown


@pytest.mark.parametrize(
    ("worker", "named"),
    [
        (Platform("Linux", "aarch64", "3.11", "glibc 2.36"), "Linux aarch64"),
        (Platform("Darwin", "x86_64", "3.11", ""), "Darwin x86_64"),
        (Platform("Linux", "x86_64", "3.12", "glibc 2.36"), "runs 3.12"),
        (Platform("Linux", "x86_64", "3.11", "glibc 2.31"), "has only glibc 2.31"),
        (Platform("Linux", "x86_64", "3.11", "musl 1.2"), "has musl 1.2"),
    ],
)
def test_another_platform_python_or_older_libc_is_refused_with_the_fix(
    worker: Platform, named: str
) -> None:
    message = mismatch(HERE, worker)
    assert message is not None
    assert message.startswith(PLATFORM_ERROR_PREFIX)
    assert named in message
    assert "Fix: build it where" in message and "spark.pyspark.python" in message


def test_the_platform_record_reads_back() -> None:
    assert Platform.from_json(HERE.to_json()) == HERE


@pytest.mark.parametrize(
    "master", ["local", "local[2]", "local[*]", "local[*,4]", "local-cluster[2,1,1024]"]
)
def test_a_local_master_ships_nothing(master: str) -> None:
    assert is_local_master(master)
    assert not ships_environment({"spark.master": master})


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://k8s:6443"])
def test_a_cluster_master_ships_unless_the_workers_python_is_named(master: str) -> None:
    assert not is_local_master(master)
    assert ships_environment({"spark.master": master})
    assert not ships_environment({"spark.master": master, "spark.pyspark.python": "/opt/py"})


def test_no_master_setting_means_the_local_default() -> None:
    assert not ships_environment({})


def test_requirement_names_are_normalised() -> None:
    assert requirement_name("Foo_Bar[x]>=1 ; python_version < '4'") == "foo-bar"
    assert requirement_name("confluent-kafka>=2.16,<3") == "confluent-kafka"
    assert requirement_name("PyYAML") == "pyyaml"
    with pytest.raises(ValueError):
        requirement_name(">=1")


def test_the_closure_follows_run_time_requirements_only() -> None:
    requires = {
        "ferry": ["pyspark", "pydantic"],
        "pyspark": ["py4j"],
        "py4j": [],
        "pydantic": ["pydantic-core", "typing-extensions"],
        "pydantic-core": ["typing-extensions"],
        "typing-extensions": [],
        "mypy": ["typing-extensions"],  # a development tool: nothing run-time needs it
    }
    assert runtime_closure("ferry", requires) == [
        "ferry",
        "py4j",
        "pydantic",
        "pydantic-core",
        "pyspark",
        "typing-extensions",
    ]
    # A requirement that is not installed is left out (an optional one, say).
    assert runtime_closure("ferry", {"ferry": ["absent"]}) == ["ferry"]
    # A driver-only requirement is left out with what only it needs.
    drawing = {**requires, "ferry": ["pyspark", "matplotlib"], "matplotlib": ["numpy", "py4j"]}
    drawing["numpy"] = []
    assert runtime_closure("ferry", drawing, skip=["matplotlib"]) == ["ferry", "py4j", "pyspark"]


names = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@given(st.dictionaries(names, st.lists(names, max_size=4)), names)
def test_the_closure_is_the_least_closed_set_holding_the_root(
    requires: dict[str, list[str]], root: str
) -> None:
    closure = set(runtime_closure(root, requires))
    assert closure <= set(requires)
    assert (root in closure) == (root in requires)
    for name in closure:
        assert {r for r in requires[name] if r in requires} <= closure  # closed
    # least: every member is reachable from the root
    reached, todo = set(), [root] if root in requires else []
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(r for r in requires[name] if r in requires)
    assert closure == reached


KEY: dict[str, Any] = {
    "interpreter": "/usr/bin/python3.11",
    "platform": HERE,
    "distributions": {"pyspark": "4.3.0", "confluent-kafka": "2.16.1"},
    "package_digest": "abc",
    "excluded": ["lib/*/pyspark/jars/*"],
}


def _key(**changes: Any) -> str:
    return archive_key(**{**KEY, **changes})


def test_the_archive_key_changes_with_everything_in_the_archive() -> None:
    base = _key()
    assert _key(distributions={"confluent-kafka": "2.16.1", "pyspark": "4.3.0"}) == base
    changed = [
        _key(interpreter="/opt/python3.11"),
        _key(platform=Platform("Linux", "aarch64", "3.11", "glibc 2.36")),
        _key(distributions={"pyspark": "4.3.1", "confluent-kafka": "2.16.1"}),
        _key(distributions={"pyspark": "4.3.0"}),
        _key(package_digest="abd"),
        _key(excluded=[]),
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)


def test_a_worker_without_the_interpreter_gets_the_fix() -> None:
    spark_error = (
        "Job aborted ... java.io.IOException: Cannot run program "
        f'"{PYTHON_IN_ARCHIVE}": error=2, No such file or directory'
    )
    fix = missing_python(spark_error, "/usr/bin/python3.11", "3.11")
    assert fix is not None
    assert "/usr/bin/python3.11" in fix and "Fix: install Python 3.11" in fix
    assert missing_python('Cannot run program "python3": error=2', "/x", "3.11") is None
    assert cluster.environment_error(spark_error) is not None
    assert cluster.environment_error("some other failure") is None


def _shipped_prefix(tmp_path: Path, built: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / MARKER_FILE).write_text(built.to_json())
    monkeypatch.setattr(sys, "prefix", str(tmp_path))


def test_the_worker_daemon_refuses_an_environment_of_another_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _shipped_prefix(tmp_path, Platform("Linux", "riscv64", "3.11", "glibc 2.36"), monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        python_workers.main()
    assert exit_.value.code == 1
    error = error_from_text(capsys.readouterr().err)  # what the driver shows
    assert error is not None and str(error).startswith(PLATFORM_ERROR_PREFIX)
    assert "riscv64" in str(error)


def test_the_worker_daemon_checks_only_a_shipped_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # no marker: a local master's Python
    assert python_workers.check_shipped_environment() is None
    from ferry.engine.spark.packing import current_platform

    _shipped_prefix(tmp_path, current_platform(), monkeypatch)
    assert python_workers.check_shipped_environment() is None


def test_a_local_master_changes_nothing_and_a_named_python_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.setenv("PYSPARK_PYTHON", "/venv/bin/python")
    settings = {"spark.master": "local[*,4]"}
    assert cluster.prepare_cluster(settings, tmp_path, tmp_path) is None
    assert settings == {"spark.master": "local[*,4]"}
    assert os.environ["PYSPARK_PYTHON"] == "/venv/bin/python"
    named = {"spark.master": "spark://h:7077", "spark.pyspark.python": "/opt/ferry/bin/python"}
    assert cluster.prepare_cluster(named, tmp_path, tmp_path) is None
    assert "spark.archives" not in named
    assert os.environ["PYSPARK_PYTHON"] == "/opt/ferry/bin/python"


def test_the_local_spark_state_reads_back_and_a_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    import json

    me = SparkProcess("master", os.getpid(), 0.0, str(tmp_path / "m.log"), "no-such-marker")
    state = SparkCluster("spark://127.0.0.1:1", "http://127.0.0.1:2", str(tmp_path), [me])
    (tmp_path / "spark.json").write_text(json.dumps(state.to_json()))
    assert read_state(tmp_path) == state
    assert me.process() is None  # another start time: a pid that was recycled
    assert read_state(tmp_path / "absent") is None
