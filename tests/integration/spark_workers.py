"""A Spark standalone cluster whose workers never had ferry installed, for the session.

Two workers of one core each, started by `ferry.local.spark` from pyspark's own spark-class,
each in a mount namespace where a tmpfs hides this virtualenv (and ferry's source tree): what
a node without ferry looks like. Only the environment ferry ships can run a flow there.
Spark's own records (an application's event log) say where its tasks ran.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

import ferry
from ferry.local import spark as local_spark

__all__ = [
    "WORKER_CORES",
    "WORKER_MEMORY",
    "can_unshare",
    "driver_only",
    "executor_of",
    "executors_in_status",
    "hidden",
    "hiding_wrapper",
    "spark_events",
    "tasks_by_executor",
]

WORKER_CORES = 1
WORKER_MEMORY = "1g"

# Mount Spark's home where the workers can see it, then hide the virtualenv (and the source
# tree of an editable ferry) behind empty tmpfs mounts, then run the worker from there.
HIDE = """set -e
home=$1; seen=$2; shift 2
mount --bind "$home" "$seen"
while [ "$1" != -- ]; do mount -t tmpfs -o size=1m tmpfs "$1"; shift; done
shift
export SPARK_HOME="$seen"
exec "$@"
"""


def hidden() -> list[str]:
    """Directories a node without ferry does not have: the virtualenv, ferry's source tree."""
    hidden = [sys.prefix]
    source = Path(ferry.__file__).resolve().parent.parent
    if not source.is_relative_to(sys.prefix):
        hidden.append(str(source))
    return hidden


def can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    check = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return check.returncode == 0


def driver_only(directory: Path) -> Path:
    """A directory of the cluster's that its workers cannot see (hidden like the virtualenv):
    what the driver's machine has and the executors' do not, such as ferry's state directory."""
    path = directory / "driver-only"
    path.mkdir(exist_ok=True)
    return path


def hiding_wrapper(directory: Path) -> local_spark.Wrap:
    """The wrap that starts a worker with this virtualenv, ferry's source and the cluster's
    `driver_only` directory hidden."""
    home = local_spark.spark_home()
    private = str(driver_only(directory))
    seen = directory / "spark-home"  # where the workers see Spark's home
    seen.mkdir(exist_ok=True)

    def hide_ferry(command: list[str]) -> list[str]:
        spark_class = str(seen / Path(command[0]).relative_to(home))
        return [
            *("unshare", "-m", "--propagation", "private", "sh", "-c", HIDE, "hide"),
            *(str(home), str(seen), *hidden(), private, "--", spark_class, *command[1:]),
        ]

    return hide_ferry


def executor_of(worker: psutil.Process) -> tuple[str, psutil.Process] | None:
    """The executor JVM a worker started (its id and process), if one runs. On YARN the JVM's
    parent is a shell whose one argument is the whole command: not the JVM."""
    for child in worker.children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.Error:
            continue
        if "--executor-id" in command and any("CoarseGrainedExecutorBackend" in a for a in command):
            return command[command.index("--executor-id") + 1], child
    return None


def executors_in_status(config: Path) -> dict[str, Any]:
    """`ferry status --json`'s account of flow A->B per Spark executor id."""
    status = subprocess.run(
        [sys.executable, "-m", "ferry", "status", "-c", str(config), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    executors: dict[str, Any] = json.loads(status.stdout)["flows"]["A->B"]["executors"]
    return executors


def spark_events(event_logs: Path, kind: str) -> list[dict[str, Any]]:
    """Every event of `kind` (`SparkListenerTaskEnd`, ...) in the application event logs under
    `event_logs`, in order. A log still being written (or cut by a killed driver) may end in
    half a line, which is skipped."""
    found = []
    for log in sorted(event_logs.rglob("events_*")):  # Spark 4 writes a directory of rolled files
        for line in log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("Event") == kind:
                found.append(event)
    return found


def tasks_by_executor(event_logs: Path) -> dict[str, dict[str, int]]:
    """Per executor id, its tasks by how they ended, from the application's Spark event log:
    `Success`, `ferry` (failed in ferry's own code, which then ran there: a retriable error
    such as a coordinator still loading on a fresh cluster; Spark retried it), or Spark's
    reason."""
    ended: dict[str, dict[str, int]] = {}
    for event in spark_events(event_logs, "SparkListenerTaskEnd"):
        reason = event["Task End Reason"]
        how = reason["Reason"]
        if how != "Success" and "[ferry-error:" in reason.get("Description", ""):
            how = "ferry"
        counts = ended.setdefault(event["Task Info"]["Executor ID"], {})
        counts[how] = counts.get(how, 0) + 1
    return ended
