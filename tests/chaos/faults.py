"""The faults: `ferry run` killed or stopped and restarted, brokers killed and restarted."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ferry.local.cluster import LocalCluster

__all__ = ["FAULTS", "FerryProcess", "restart_after_kill"]

FAULTS = ("sigkill-ferry", "sigterm-ferry", "kill-target-broker", "kill-source-broker")


class FerryProcess:
    """`ferry run -c CONFIG` in its own process group; each incarnation logs to its own file."""

    def __init__(self, config: Path, logs: Path) -> None:
        self.config = config
        self.logs = logs
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exit_codes: list[int] = []

    def start(self) -> None:
        self.starts += 1
        log = self.logs / f"ferry-run-{self.starts}.log"
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ferry", "run", "-c", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
            )

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the current incarnation's log ("" before the first)."""
        log = self.logs / f"ferry-run-{self.starts}.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def sigkill(self) -> None:
        """SIGKILL to the `ferry run` process, as a crash; its JVM and Python workers notice
        their parent is gone and exit (they are killed after 30 s if they do not)."""
        process = self._running()
        process.kill()
        self.exit_codes.append(process.wait(30))
        self._wait_group_gone(process.pid, 30)

    def sigterm(self, timeout: float = 240) -> int:
        """SIGTERM: ferry finishes the running batch and exits; returns its exit code."""
        self.terminate()
        return self.await_exit(timeout)

    def terminate(self) -> None:
        """Send SIGTERM without waiting, so that several runs stop side by side."""
        self._running().terminate()

    def await_exit(self, timeout: float = 240) -> int:
        """Wait for a run told to stop; its exit code (its stacks and a kill if it hangs)."""
        process = self.process
        assert process is not None, "ferry run was never started"
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(self._stuck(process, timeout)) from None
        self.exit_codes.append(code)
        self._wait_group_gone(process.pid, 30)
        return code

    def _stuck(self, process: subprocess.Popen[bytes], timeout: float) -> str:
        """Why a stop did not end: every thread's stack (ferry prints them on SIGUSR1, into
        its log), then the process group is killed."""
        log = self.logs / f"ferry-run-{self.starts}.log"
        size = log.stat().st_size if log.exists() else 0
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        seen = size
        while time.monotonic() < deadline:  # until the stacks have come and stopped coming
            time.sleep(0.5)
            now = log.stat().st_size if log.exists() else 0
            if now == seen and now > size:
                break
            seen = now
        stacks = log.read_text(errors="replace")[-8000:] if log.exists() else ""
        process.kill()
        process.wait(30)
        self._wait_group_gone(process.pid, 30)
        return f"ferry run did not exit within {timeout:.0f} s of SIGTERM; its log ends:\n{stacks}"

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            log = self.logs / f"ferry-run-{self.starts}.log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"ferry run is not running; its log ends with:\n{tail}")
        return self.process

    @staticmethod
    def _wait_group_gone(pgid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def restart_after_kill(broker: LocalCluster) -> None:
    """SIGKILL the broker, then start it again on the same ports and data."""
    broker.kill()
    broker.restart(timeout=120)
