"""The driver's side of running on a Spark cluster: spark-submit's settings, the shipped
environment (`environment.py`) and the Python the driver's own Spark processes run.

Spark runs every Python process of a job, on the executors and on the driver (a Python data
source plans its reads in Python processes the driver's JVM starts), with one interpreter
path. With the environment shipped that path is `./ferry-env/bin/python`, relative to each
process's working directory: an executor's holds the unpacked archive; the driver's JVM gets
a working directory of its own (`<ferry.state.dir>/driver`) where `ferry-env/bin/python` is
this virtualenv's Python. Under spark-submit the JVM already runs in spark-submit's working
directory, so the link is made there.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path

from ferry.engine.spark.environment import (
    ARCHIVE_NAME,
    PYTHON_IN_ARCHIVE,
    missing_python,
    ships_environment,
)
from ferry.errors import ConfigError, FerryError

__all__ = ["environment_error", "launched_in", "prepare_cluster", "submitted_settings"]

log = logging.getLogger("ferry")

# In a `ferry-env` directory ferry made for the driver (never one it did not make).
_OURS = ".made-by-ferry"


def submitted_settings() -> dict[str, str]:
    """The `spark.*` settings spark-submit gave this driver (--master, --conf, ...); empty when
    ferry was not started by spark-submit."""
    if not _under_spark_submit():
        return {}
    from pyspark import SparkConf

    from ferry.engine.spark.internals import connect_to_submitted_jvm

    # Connects to spark-submit's JVM and reads the settings it was launched with.
    connect_to_submitted_jvm()
    settings = {str(k): str(v) for k, v in SparkConf().getAll() if str(k).startswith("spark.")}
    if settings.get("spark.app.name", "").endswith(".py"):
        del settings["spark.app.name"]  # spark-submit's default, the script's name: keep ferry's
    return settings


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ  # set by spark-submit for the driver's Python


def prepare_cluster(
    settings: MutableMapping[str, str],
    state_dir: Path,
    cache_dir: Path,
    notice: Callable[[str], None] | None = None,
) -> Path | None:
    """Ship ferry's environment when `settings` name a cluster master (adds it to
    `spark.archives` and points Spark's Python at it); returns the working directory the
    driver's JVM must start in, or None."""
    python = settings.get("spark.pyspark.python")
    if python:
        os.environ["PYSPARK_PYTHON"] = python  # the user's Python, installed on every worker
    if not ships_environment(settings):
        return None
    from ferry.engine.spark.packing import ensure_archive

    packed = ensure_archive(cache_dir, create=False)
    if packed is None:
        if notice is not None:
            notice(
                "packing ferry's environment for the executors (once per version of ferry "
                "and its packages; `ferry pack` does it ahead of time)"
            )
        packed = ensure_archive(cache_dir)
        assert packed is not None
        log.info("packed ferry's environment in %.1f s: %s", packed.seconds, packed.path)
    shipped = f"{packed.path}#{ARCHIVE_NAME}"
    archives = settings.get("spark.archives", "")
    settings["spark.archives"] = f"{archives},{shipped}" if archives else shipped
    os.environ["PYSPARK_PYTHON"] = PYTHON_IN_ARCHIVE
    if _under_spark_submit():
        _driver_environment(Path.cwd(), cache_dir)
        return None
    directory = state_dir / "driver"
    _driver_environment(directory, cache_dir)
    return directory


def _driver_python(cache_dir: Path) -> str:
    """This virtualenv's Python, through the wrapper that loads pyspark compiled when it can."""
    from ferry.engine.spark.python_workers import worker_python

    return worker_python(sys.executable, cache_dir) or sys.executable


def _driver_environment(directory: Path, cache_dir: Path) -> None:
    """`directory/ferry-env/bin/python`: the driver's Spark processes run this virtualenv."""
    env = directory / ARCHIVE_NAME
    if env.exists() and not (env / _OURS).exists():
        raise ConfigError(
            f"{env} exists and was not made by ferry; the driver's Spark runs "
            f"{PYTHON_IN_ARCHIVE} from {directory}. Fix: remove or rename it, or start "
            "spark-submit in another directory"
        )
    (env / "bin").mkdir(parents=True, exist_ok=True)
    (env / _OURS).touch()
    # A script, not a link: Python finds its virtualenv from the path it was started as.
    pending = env / "bin" / f".python.{os.getpid()}"
    pending.write_text(f'#!/bin/sh\nexec {shlex.quote(_driver_python(cache_dir))} "$@"\n')
    pending.chmod(0o755)
    os.replace(pending, env / "bin" / "python")


@contextlib.contextmanager
def launched_in(directory: Path | None) -> Iterator[None]:
    """Run the block (the start of Spark's driver JVM) in `directory`, if one is given.

    Every path ferry gives Spark is absolute, so only the Python processes the JVM starts see
    the difference."""
    if directory is None:
        yield
        return
    saved = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(saved)


def environment_error(spark_error: str) -> FerryError | None:
    """A worker that cannot start ferry's shipped environment, said with the fix; else None."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    fix = missing_python(spark_error, os.path.realpath(sys.executable), python)
    return FerryError(fix) if fix else None
