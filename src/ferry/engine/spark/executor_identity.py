"""The Spark executor a Python worker serves: its id (`driver` in local mode) and host.

PySpark's TaskContext does not say which executor runs the task. Every Python worker is a
child (or a fork of a child) of its executor's JVM, whose command line does: a standalone,
YARN or Kubernetes executor runs `CoarseGrainedExecutorBackend --executor-id N`; in local mode
the tasks run in the driver's JVM. Statistics only: a worker that cannot tell says `unknown`.
"""

from __future__ import annotations

import functools
import socket

import psutil

__all__ = ["executor_identity", "executor_of"]


def executor_of(command_line: list[str]) -> str | None:
    """The executor id a JVM's command line names, `driver` for a driver's, None if neither."""
    if "--executor-id" in command_line:
        index = command_line.index("--executor-id")
        if index + 1 < len(command_line):
            return command_line[index + 1]
    if any("SparkSubmit" in part or "PythonGatewayServer" in part for part in command_line):
        return "driver"
    return None


@functools.cache
def executor_identity() -> dict[str, str]:
    """{"id": executor id, "host": host name} of this process's executor."""
    found = "unknown"
    try:
        for parent in psutil.Process().parents():
            executor = executor_of(parent.cmdline())
            if executor is not None:
                found = executor
                break
    except psutil.Error:
        pass
    return {"id": found, "host": socket.gethostname()}
