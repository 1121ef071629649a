"""Run the `ferry` command line the way a user does, wide output (200 columns).

`run_ferry` runs ferry's own entry point (`ferry.cli.app.main`: its redacting output streams,
its one-line errors) in this process through typer's CliRunner: no interpreter or Spark JVM
starts per command. What the process writes to its file descriptors 1 and 2 (librdkafka's raw
lines would go there) is captured too, after what Python printed. A `ferry run` in process
copies with the session's Spark (the `spark` fixture must be active): it never stops it, and
the signal handlers, environment and argv it changes are put back afterwards.

`run_ferry_process` runs `python -m ferry` as a separate process: for the entry point itself,
and where a process is killed or its exit is the point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

WIDE = {"COLUMNS": "200"}


@dataclass(frozen=True)
class FerryResult:
    """What a subprocess.CompletedProcess says of a run: arguments, exit code, output."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run_ferry(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> FerryResult:
    """`ferry ARGS` in this process. `timeout` is pytest-timeout's job here (kept for calls
    that pass it to either runner)."""
    del timeout
    from ferry.cli.app import main

    had_spark = _spark_running()
    saved_env, saved_argv = dict(os.environ), sys.argv
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    with (
        _FdCapture(1) as fd_out,
        _FdCapture(2) as fd_err,
        _session_spark_kept(),
        CliRunner().isolation(env={**WIDE, **(env or {})}) as (out, err, _mixed),
    ):
        sys.argv = ["ferry", *args]
        try:
            main()
        except SystemExit as exit_:
            code = _exit_code(exit_.code)
        except Exception:  # a bug: Python prints the traceback and exits 1
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        stdout = out.getvalue().decode(errors="replace")
        stderr = err.getvalue().decode(errors="replace")
    sys.argv = saved_argv
    os.environ.clear()
    os.environ.update(saved_env)
    for sig, handler in saved_signals.items():
        signal.signal(sig, handler)
    if not had_spark and _spark_running():
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        raise AssertionError(
            f"ferry {' '.join(args)} started a Spark of its own in the test process: "
            "an in-process `ferry run` needs the session's (request the `spark` fixture)"
        )
    return FerryResult(args, code, stdout + fd_out.text, stderr + fd_err.text)


def run_ferry_process(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m ferry ARGS` as its own process (with its own Spark, if it starts one)."""
    return subprocess.run(
        [sys.executable, "-m", "ferry", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **WIDE, **(env or {})},
    )


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")  # sys.exit("message") prints it and exits 1
    return 1


def _spark_running() -> bool:
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


@contextlib.contextmanager
def _session_spark_kept() -> Iterator[None]:
    """A command on the session's Spark leaves it running. ferry stops (and archives the JVM
    of) a session it started: `ferry audit` its own, `ferry run` the one it made at start.
    In process that session is the test session's, which later tests still use."""
    from pyspark.sql import SparkSession

    from ferry.engine.spark.class_archive import ClassArchive

    session = SparkSession.getActiveSession() if _spark_running() else None
    finish, stop = ClassArchive.finish, SparkSession.stop

    def stop_unless_the_session(self: Any) -> None:
        if self is not session:
            stop(self)

    ClassArchive.finish = lambda self, spark, timeout=0.0: False  # type: ignore[method-assign]
    SparkSession.stop = stop_unless_the_session  # type: ignore[method-assign]
    try:
        yield
    finally:
        ClassArchive.finish = finish  # type: ignore[method-assign]
        SparkSession.stop = stop  # type: ignore[method-assign]


class _FdCapture:
    """What is written to file descriptor `fd` (by C code, say) while the block runs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""

    def __enter__(self) -> _FdCapture:
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = os.dup(self.fd)
        self._file = tempfile.TemporaryFile(buffering=0)
        os.dup2(self._file.fileno(), self.fd)
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, self.fd)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
