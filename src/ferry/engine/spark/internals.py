"""Every use ferry makes of pyspark's private API (`_jsc`, `_jvm`, `_gateway`,
`_ensure_initialized`, `launch_gateway`, `_find_spark_home`), each behind a small named
function saying why no public pyspark API serves.

These are the places a pyspark upgrade can break without a deprecation: a Spark upgrade should
read this module first, and nothing else in ferry reaches past pyspark's public API. pyspark is
imported inside each function, so importing this module costs nothing (the copy loop's
workers and the client library import no pyspark).
"""

from __future__ import annotations

import contextlib
import io
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

__all__ = [
    "connect_to_submitted_jvm",
    "find_spark_home",
    "gateway_process",
    "gateway_running",
    "hadoop_configuration",
    "jvm",
    "start_gateway",
    "total_executor_cores",
]


def total_executor_cores(spark: SparkSession) -> int | None:
    """The cores of the executors registered with the scheduler backend now, or None where the
    backend cannot say (a local master, a JVM call that failed).

    Why private: pyspark's public figures are `defaultParallelism` (fixed by
    `spark.default.parallelism`, never below 2 on a cluster) and the status tracker's
    executor infos, which do not carry cores; only the JVM's `SchedulerBackend` counts them."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]  # py4j ships no types

    try:
        return int(spark.sparkContext._jsc.sc().schedulerBackend().totalCoreCount())
    except (Py4JError, AttributeError, TypeError, ValueError):
        return None


def jvm(spark: SparkSession) -> Any:
    """The session's py4j JVM view, to reach Hadoop's `FileSystem`, `Path` and commons-io's
    `IOUtils` (untyped py4j objects, hence Any).

    Why private: pyspark exposes no Hadoop FileSystem; a checkpoint on hdfs://, s3a://, ... can
    only be read and written the way Spark itself does, through the JVM."""
    return spark.sparkContext._jvm


def hadoop_configuration(spark: SparkSession) -> Any:
    """The session's Hadoop `Configuration` (a py4j object): the credentials and filesystem
    settings Spark opens checkpoints with.

    Why private: pyspark has no accessor for it; `spark.conf` holds only the `spark.hadoop.*`
    keys, not the configuration Hadoop assembled from them and its own files."""
    return spark.sparkContext._jsc.hadoopConfiguration()


def gateway_running() -> bool:
    """Whether this Python process already has Spark's driver JVM (a session started, or
    stopped: the gateway outlives it).

    Why private: pyspark has no public question for it; `SparkSession.getActiveSession()`
    says whether a session is active, not whether the JVM (which outlives it) runs."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def start_gateway(conf: SparkConf, output: IO[bytes]) -> None:
    """Start Spark's driver JVM with `conf`, its stdout and stderr written to `output`, and make
    it the one the next session uses.

    Why private: a SparkSession starts its JVM with the console as stdout and stderr, and no
    public option redirects them; `launch_gateway` takes the Popen arguments, and
    `_ensure_initialized` hands the gateway to SparkContext."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(  # type: ignore[no-untyped-call]  # unannotated in pyspark
        conf, popen_kwargs={"stdout": output, "stderr": output}
    )
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def connect_to_submitted_jvm() -> None:
    """Connect to the JVM spark-submit started for this driver (PYSPARK_GATEWAY_PORT), so that
    `SparkConf()` reads the settings it was launched with, before any session exists.

    Why private: `SparkConf()` reads the JVM's system properties only once a gateway is
    connected, and pyspark connects one only inside `SparkContext`; ferry needs the submitted
    settings before it builds its session."""
    from pyspark import SparkContext

    SparkContext._ensure_initialized()


def gateway_process(spark: SparkSession) -> Any:
    """The driver JVM's process (a Popen whose stdin was checked to be there), or None when
    pyspark did not start it (spark-submit did, or a gateway of its own).

    Why private: pyspark keeps it only as `_gateway.proc`; closing its stdin is how the JVM is
    told to exit (and write its class archive, see class_archive) without killing it."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return proc if proc is not None and getattr(proc, "stdin", None) is not None else None


def find_spark_home() -> str | None:
    """The Spark installation pyspark runs (SPARK_HOME, else the one inside the pyspark
    package), or None when it cannot be found.

    Why private: pyspark's launcher finds it with `_find_spark_home`, and no public function
    says where it is; ferry needs it for `bin/spark-class` and the Python workers' paths.
    When it finds none it prints a page of advice and calls `sys.exit(-1)`: that happens where
    pyspark is imported from Spark's `pyspark.zip` with no SPARK_HOME, as in the driver of a
    YARN cluster-mode application, and must not end the run."""
    from pyspark.find_spark_home import _find_spark_home

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return str(_find_spark_home())
    except (Exception, SystemExit):
        return None
