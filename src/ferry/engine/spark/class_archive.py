"""A class data sharing (CDS) archive of the Spark driver JVM, cached per machine.

Starting Spark's driver JVM is mostly class loading: about 280 jars are scanned and thousands
of classes parsed and verified, several seconds of CPU on every `ferry run`. A dynamic CDS
archive (JDK 13 and later) holds those classes already parsed; with it a bare Spark session
starts in about half the time here (12.3-13.4 s to 6.0-6.6 s on 2 busy cores).

How the archive comes to be: a `ferry run` that finds none starts its JVM with
`-XX:ArchiveClassesAtExit=<temporary file>`. When the run ends, `ClassArchive.finish` closes
the JVM's stdin (Spark's gateway then calls System.exit), waits for the JVM to write the
archive, and renames it into place. The JVM deletes a file it failed to write and exits with
an error, so a file that is there after a clean exit is complete; a run killed before then
leaves only its temporary file, which a later run deletes. The wait is short
(`FINISH_TIMEOUT_SECONDS`): a JVM still writing then is ended and its file deleted, so a
stopping `ferry run` never waits long on the archive; one stopped by a signal or the API
does not wait at all (`Runner._finish_class_archive` passes no time).

The archive's name is a digest of what it depends on (the java binary, pyspark's version and
jars, the classpath settings and JVM options), so any change makes a new one. A JVM that
cannot use an archive (say, a different JDK build) ignores it and starts as before: the
default `-Xshare:auto` never fails a start, and `-Xlog:cds=off` keeps its warnings quiet.

Pure decisions here (names, options); the only I/O is on the cache directory and the JVM
process that Spark started.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from ferry.engine.spark.internals import gateway_process

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CLASSPATH_SETTINGS", "ClassArchive", "archive_key", "plan_archive"]

# Spark settings that change what the driver JVM loads.
CLASSPATH_SETTINGS = (
    "spark.jars",
    "spark.jars.packages",
    "spark.driver.extraClassPath",
    "spark.driver.extraLibraryPath",
)
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")
KEEP_ARCHIVES = 3  # per machine (cache directory), the most recently used
# Writing the archive takes about 20 s on a quiet machine here. A JVM still writing after
# this is ended and its partial archive deleted (the next run writes one): a stop must not
# wait long on a cache. On 2 cores shared with six busy brokers a `ferry run` stopped by
# SIGTERM was still waiting on its JVM's write after 240 s (the wait was 120 s then).
FINISH_TIMEOUT_SECONDS = 45.0


def archive_key(
    java: str,
    spark_version: str,
    jars: Iterable[str],
    settings: Mapping[str, str],
    options: Iterable[str],
) -> str:
    """A digest of everything the archive depends on."""
    parts = [
        f"java={java}",
        f"spark={spark_version}",
        *(f"jar={j}" for j in sorted(jars)),
        *(f"{k}={settings[k]}" for k in CLASSPATH_SETTINGS if k in settings),
        *(f"option={o}" for o in options),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ClassArchive:
    """The JVM options for one Spark session, and the archive it writes if any."""

    options: tuple[str, ...]
    final: Path
    pending: Path | None = None  # written by this session's JVM at exit, then renamed to final

    def finish(self, spark: SparkSession, timeout: float = FINISH_TIMEOUT_SECONDS) -> bool:
        """End the session's JVM and keep the archive it wrote. True when one was kept.

        Only for a session this process started and will not use again.
        """
        if self.pending is None:
            return False
        proc = gateway_process(spark)
        if proc is None:
            return False
        with contextlib.suppress(Exception):
            spark.stop()
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()  # Spark's gateway exits (and the JVM dumps) on end of input
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait(timeout=10)  # reaped: a killed JVM writes nothing more
            with contextlib.suppress(OSError):
                self.pending.unlink()
            return False
        if code != 0 or not self.pending.exists():
            with contextlib.suppress(OSError):
                self.pending.unlink()
            return False
        os.replace(self.pending, self.final)
        return True


def plan_archive(cache_dir: Path, key: str, create: bool) -> ClassArchive | None:
    """Use the archive for `key` if there is one; else, when `create`, write one at exit."""
    directory = cache_dir / "jvm"
    final = directory / f"spark-{key}.jsa"
    if final.exists():
        with contextlib.suppress(OSError):
            os.utime(final)  # recently used: kept when old archives are pruned
        return ClassArchive((f"-XX:SharedArchiveFile={final}", *QUIET), final)
    if not create:
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(directory)
        _prune(directory, KEEP_ARCHIVES - 1)
    except OSError:
        return None
    pending = directory / f"spark-{key}.{os.getpid()}.tmp"
    return ClassArchive((f"-XX:ArchiveClassesAtExit={pending}", *QUIET), final, pending)


def _prune(directory: Path, keep: int) -> None:
    """Keep the `keep` most recently used archives: each venv or Spark upgrade makes a new one
    (about 165 MB), and the old ones would pile up."""
    archives = sorted(directory.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _remove_abandoned(directory: Path) -> None:
    """Temporary archives of runs that were killed, or whose JVM outlived the wait (an hour
    is far longer than any JVM takes to write one)."""
    for path in directory.glob("spark-*.tmp"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(path.suffixes[-2].lstrip("."))
            if not psutil.pid_exists(pid) or time.time() - path.stat().st_mtime > 3600:
                path.unlink()


def java_identity() -> str:
    """The java binary Spark will run (JAVA_HOME's, else the one on PATH), with its mtime so
    an upgraded JDK in the same place is a different one."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java:
        return "none"
    real = os.path.realpath(java)
    try:
        return f"{real}@{os.stat(real).st_mtime_ns}"
    except OSError:
        return real
