"""`ferry local yarn up`'s errors before and while the JVM starts, without starting one: a busy
NameNode port, no Java, a Java runtime without a compiler, a JVM that exits or is never ready
(its log named), a cluster already running in the directory."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from ferry.errors import LocalClusterError
from ferry.local import yarn


def test_a_busy_namenode_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LocalClusterError, match=f"port {port} on 127.0.0.1 is in use"):
            yarn.up(tmp_path, namenode_port=port)
    assert not (tmp_path / "yarn.json").exists()


def test_no_java_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LocalClusterError, match="Java is not installed"):
        yarn.up(tmp_path / "yarn")


def test_a_java_runtime_without_a_compiler_asks_for_a_jdk(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho java.base@17\necho java.logging@17\n")
    java.chmod(0o755)
    with pytest.raises(LocalClusterError, match="needs a JDK"):
        yarn._java_home(str(java))


def _started(command: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def test_a_jvm_that_exits_while_starting_shows_its_log(tmp_path: Path) -> None:
    log = tmp_path / "yarn.log"
    log.write_text("java.net.BindException: Address already in use\n")
    proc = _started([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(LocalClusterError, match="exited with code 3") as raised:
        yarn._wait_ready(proc, tmp_path / "ready.json", log, timeout=30)
    assert "BindException" in str(raised.value) and str(log) in str(raised.value)


def test_a_jvm_never_ready_names_its_log_and_is_stopped(tmp_path: Path) -> None:
    log = tmp_path / "yarn.log"
    log.write_text("starting\n")
    ready = tmp_path / "ready.json"
    proc = _started([sys.executable, "-c", "import time; time.sleep(60)", str(ready)])
    started = psutil.Process(proc.pid).create_time()
    try:
        with pytest.raises(LocalClusterError, match=r"not ready after 1s .*yarn\.log"):
            yarn._wait_ready(proc, ready, log, timeout=1)
        assert yarn._stop_pid(proc.pid, started, str(ready), timeout=10)
        assert proc.wait(10) is not None
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_second_up_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = _started([sys.executable, "-c", "import time; time.sleep(60)", str(ready)])
    try:
        state = yarn.YarnCluster(
            hadoop_conf_dir=str(tmp_path / "conf"),
            hdfs="hdfs://127.0.0.1:1",
            resourcemanager="127.0.0.1:2",
            webapp="127.0.0.1:3",
            nodemanagers=2,
            directory=str(tmp_path),
            pid=proc.pid,
            started=psutil.Process(proc.pid).create_time(),
            log=str(tmp_path / "yarn.log"),
            marker=str(ready),
            seconds=1.0,
        )
        (tmp_path / "yarn.json").write_text(json.dumps(state.to_json()))
        with pytest.raises(LocalClusterError, match="already runs"):
            yarn.up(tmp_path)
        # down stops exactly that pid (its command line names the ready file).
        assert yarn.down(tmp_path)
        assert proc.wait(10) is not None
        assert not (tmp_path / "yarn.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_down_leaves_a_recycled_pid_alone(tmp_path: Path) -> None:
    proc = _started([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # The recorded pid now runs something else: its command line names no ready file.
        assert not yarn._stop_pid(
            proc.pid, psutil.Process(proc.pid).create_time(), str(tmp_path / "ready.json")
        )
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
