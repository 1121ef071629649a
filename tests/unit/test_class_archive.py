"""The driver JVM's class archive: its name follows what it depends on; runs use or write it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ferry.engine.spark.class_archive import (
    KEEP_ARCHIVES,
    QUIET,
    ClassArchive,
    archive_key,
    plan_archive,
)

BASE: dict[str, Any] = {
    "java": "/usr/lib/jvm/17/bin/java@1",
    "spark_version": "4.3.0",
    "jars": ["a.jar", "b.jar"],
    "settings": {"spark.master": "local[2]"},
    "options": ["-XX:+UseSerialGC"],
}


def _key(**changes: Any) -> str:
    return archive_key(**{**BASE, **changes})


def test_the_key_changes_with_everything_the_archive_depends_on() -> None:
    base = _key()
    assert _key(jars=["b.jar", "a.jar"]) == base  # listing order does not matter
    assert _key(settings={"spark.master": "local[4]"}) == base  # not a classpath setting
    changed = [
        _key(java="/usr/lib/jvm/21/bin/java@1"),
        _key(spark_version="4.3.1"),
        _key(jars=["a.jar", "b.jar", "c.jar"]),
        _key(settings={"spark.jars": "/x/extra.jar"}),
        _key(settings={"spark.driver.extraClassPath": "/x"}),
        _key(options=["-XX:+UseG1GC"]),
    ]
    assert base not in changed
    assert len(set(changed)) == len(changed)


def test_an_existing_archive_is_used_and_nothing_is_written(tmp_path: Path) -> None:
    final = tmp_path / "jvm" / "spark-k1.jsa"
    final.parent.mkdir()
    final.write_bytes(b"archive")
    plan = plan_archive(tmp_path, "k1", create=True)
    assert plan == ClassArchive((f"-XX:SharedArchiveFile={final}", *QUIET), final)
    assert plan.finish(spark=None) is False  # nothing pending: the session is left alone


def test_without_an_archive_a_run_writes_one_at_exit_only_when_asked(tmp_path: Path) -> None:
    assert plan_archive(tmp_path, "k1", create=False) is None
    plan = plan_archive(tmp_path, "k1", create=True)
    assert plan is not None and plan.pending is not None
    assert plan.pending.parent == tmp_path / "jvm"
    assert plan.pending.name == f"spark-k1.{os.getpid()}.tmp"
    assert plan.options == (f"-XX:ArchiveClassesAtExit={plan.pending}", *QUIET)
    assert plan.final == tmp_path / "jvm" / "spark-k1.jsa"


def test_temporary_archives_of_dead_runs_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "jvm"
    directory.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    abandoned = directory / f"spark-k0.{int(dead.stdout)}.tmp"
    abandoned.write_bytes(b"half")
    alive = directory / f"spark-k0.{os.getppid()}.tmp"  # a run still writing one
    alive.write_bytes(b"busy")
    plan_archive(tmp_path, "k1", create=True)
    assert not abandoned.exists()
    assert alive.exists()


class _Proc:
    def __init__(self, code: int, writes: Path | None, busy: bool = False) -> None:
        self.code, self.writes, self.stdin_closed = code, writes, False
        self.stdin = self
        self.busy, self.killed = busy, False  # busy: still writing when the wait ends

    def close(self) -> None:
        self.stdin_closed = True

    def kill(self) -> None:
        self.killed = True

    def wait(self, timeout: float) -> int:
        assert self.stdin_closed, "the JVM exits (and writes) only once its stdin is closed"
        if self.writes is not None:
            self.writes.write_bytes(b"archive" if not self.busy else b"half an archive")
        if self.busy and not self.killed:
            raise subprocess.TimeoutExpired("java", timeout)
        return self.code if not self.killed else -9


class _Spark:
    def __init__(self, proc: _Proc) -> None:
        self.sparkContext = type("Ctx", (), {"_gateway": type("Gw", (), {"proc": proc})()})()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_finish_keeps_the_archive_only_after_a_clean_exit(tmp_path: Path) -> None:
    plan = plan_archive(tmp_path, "k1", create=True)
    assert plan is not None and plan.pending is not None
    failed = _Spark(_Proc(1, plan.pending))
    assert plan.finish(failed) is False
    assert failed.stopped
    assert not plan.pending.exists() and not plan.final.exists()

    clean = _Spark(_Proc(0, plan.pending))
    assert plan.finish(clean) is True
    assert plan.final.read_bytes() == b"archive" and not plan.pending.exists()


def test_a_jvm_still_writing_when_the_wait_ends_is_ended_and_its_archive_dropped(
    tmp_path: Path,
) -> None:
    plan = plan_archive(tmp_path, "k1", create=True)
    assert plan is not None and plan.pending is not None
    proc = _Proc(0, plan.pending, busy=True)
    assert plan.finish(_Spark(proc), timeout=0.01) is False
    assert proc.killed
    assert not plan.pending.exists() and not plan.final.exists()


def test_a_run_stopped_by_a_signal_does_not_wait_for_the_write(tmp_path: Path) -> None:
    from ferry.engine.runner import Runner

    plan = plan_archive(tmp_path, "k1", create=True)
    assert plan is not None and plan.pending is not None
    stopped = _Proc(0, plan.pending, busy=True)  # would outlast any wait
    Runner._finish_class_archive(plan, _Spark(stopped), lambda: True)  # type: ignore[arg-type]
    assert stopped.killed and not plan.pending.exists() and not plan.final.exists()

    ended = _Proc(0, plan.pending)  # a run that ended by itself waits and keeps it
    Runner._finish_class_archive(plan, _Spark(ended), lambda: False)  # type: ignore[arg-type]
    assert not ended.killed and plan.final.read_bytes() == b"archive"


def test_writing_a_new_archive_keeps_only_the_most_recently_used_ones(tmp_path: Path) -> None:
    directory = tmp_path / "jvm"
    directory.mkdir()
    old = []
    for i in range(KEEP_ARCHIVES + 1):
        path = directory / f"spark-old{i}.jsa"
        path.write_bytes(b"archive")
        os.utime(path, (1000 + i, 1000 + i))
        old.append(path)
    plan_archive(tmp_path, "old0", create=True)  # used now: the most recent
    plan_archive(tmp_path, "new", create=True)  # none yet: one will be written

    kept = sorted(p.name for p in directory.glob("*.jsa"))
    assert len(kept) == KEEP_ARCHIVES - 1  # room for the one being written
    assert "spark-old0.jsa" in kept and f"spark-old{KEEP_ARCHIVES}.jsa" in kept
