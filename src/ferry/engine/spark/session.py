"""The Spark session `ferry run` copies with: ferry's settings, its log file, its JVM options.

Defaults fit a replicator's driver (no UI, no empty micro-batches, Python workers reused and
importing pyspark compiled); every `spark.*` key of the config overrides them. Spark's own log
goes to a file in the state directory, so a failing task's stack trace never floods the
console; ferry prints the one error that matters.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ferry.config.model import FerryConfig
from ferry.engine.spark.cluster import launched_in, prepare_cluster, submitted_settings
from ferry.secrets import SPARK_OPTIONS_REDACTION_REGEX, SPARK_REDACTION_REGEX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ferry.engine.spark.class_archive import ClassArchive

__all__ = [
    "DEFAULT_MASTER",
    "DEFAULT_MAX_FAILURES",
    "DRIVER_JVM_OPTIONS",
    "master_chosen",
    "spark_master",
    "spark_session",
    "start_spark",
]

# The driver JVM only plans and schedules (the records move in the Python workers), so its
# CPU goes to starting up: class loading and JIT compilation. The C1 compiler alone and the
# serial collector halve that (about 44 to 22 CPU seconds per `ferry run` on 2 cores).
DRIVER_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# All cores; a failed task is tried up to 4 times (a lease resumes where it committed).
DEFAULT_MAX_FAILURES = 4
DEFAULT_MASTER = f"local[*,{DEFAULT_MAX_FAILURES}]"


def spark_master(config: FerryConfig) -> str:
    """The master `ferry run` uses: the config's `spark.master`, else spark-submit's
    (`--master`), else DEFAULT_MASTER."""
    master = config.spark.get("spark.master") or submitted_settings().get("spark.master")
    return master or DEFAULT_MASTER


def master_chosen(config: FerryConfig) -> bool:
    """Whether the config or spark-submit names the master (else ferry chooses it)."""
    return "spark.master" in config.spark or "spark.master" in submitted_settings()


def spark_session(config: FerryConfig) -> SparkSession:
    """A Spark session from the config's `spark.*` keys; local[*,4] with no UI by default."""
    return start_spark(config)[0]


def start_spark(
    config: FerryConfig,
    write_class_archive: bool = False,
    notice: Callable[[str], None] | None = None,
) -> tuple[SparkSession, ClassArchive | None]:
    """`spark_session`, and the driver JVM's class archive (see class_archive): used when the
    machine has one; with `write_class_archive`, else written when the session ends. `notice`
    hears what takes a while the first time (packing the environment a cluster runs)."""
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": DEFAULT_MASTER,
        "spark.app.name": "ferry",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "ERROR",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.python.worker.reuse": "true",
        # Workers import pyspark's compiled modules, not its zip (see python_workers).
        "spark.python.daemon.module": "ferry.engine.spark.python_workers",
        "spark.ui.showConsoleProgress": "false",
        # Masked in Spark's log, event log and UI: settings and data source options whose name
        # or value looks secret. Spark's defaults miss sasl.jaas.config and ssl.key.pem; each
        # flow's spec option holds its clusters' client settings (see ferry.secrets).
        "spark.redaction.regex": SPARK_REDACTION_REGEX,
        "spark.sql.redaction.options.regex": SPARK_OPTIONS_REDACTION_REGEX,
        # Checkpoints live in ferry.state.dir, a local directory, where a rename is atomic.
        # Spark's default (FileContext) manager runs `readlink` and `chmod` processes for
        # every checkpoint file without Hadoop's native library (4 to 5 per micro-batch, about
        # 150 ms of each batch here); the FileSystem one runs one `chmod`.
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileSystemBasedCheckpointFileManager"
        ),
    }
    archive = None
    if "spark.driver.extraJavaOptions" not in config.spark:
        # Spark's own log (task failures print whole stack traces) goes to a file; ferry
        # prints the error that matters, once. The JVM reads this before it logs anything.
        log_config = _spark_log_config(config.state_dir.resolve())
        archive = _class_archive(config.spark, write_class_archive)
        settings["spark.driver.extraJavaOptions"] = " ".join(
            (
                f"-Dlog4j2.configurationFile={log_config}",
                *DRIVER_JVM_OPTIONS,
                *(archive.options if archive else ()),
            )
        )
    # Spark's Python workers must import ferry: run them with this interpreter by default.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local_ip = os.environ.get("SPARK_LOCAL_IP")
    if local_ip:
        settings.update({"spark.driver.bindAddress": local_ip, "spark.driver.host": local_ip})
    # spark-submit's flags (--master, --conf) over ferry's defaults; the config over both.
    settings.update(submitted_settings())
    settings.update(config.spark)
    # A cluster master: executors run ferry's shipped environment (see environment.py).
    launch_dir = prepare_cluster(settings, config.state_dir.resolve(), _cache_dir(), notice)
    if settings["spark.master"].startswith("local"):
        # Every Python process of a local Spark loads pyspark compiled, not from its zip.
        from ferry.engine.spark.python_workers import default_cache_dir, worker_python

        wrapper = worker_python(os.environ["PYSPARK_PYTHON"], default_cache_dir())
        if wrapper is not None:
            os.environ["PYSPARK_PYTHON"] = wrapper
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    with launched_in(launch_dir):
        _launch_jvm(settings, config.state_dir.resolve() / "spark.log")
        return builder.getOrCreate(), archive


def _launch_jvm(settings: dict[str, str], log: Path) -> None:
    """Start Spark's driver JVM with its stdout and stderr appended to `log`.

    What the JVM prints before (or beside) its log configuration, such as `WARNING: Using
    incubator modules: jdk.incubator.vector` at every start, is nothing a user of ferry can act
    on; in the console it buries ferry's own lines. pyspark would start the JVM with the
    console as its stderr; started here first, the session then uses this JVM. Under
    spark-submit (or when a session already runs) the JVM exists and nothing happens.
    """
    from pyspark import SparkConf

    from ferry.engine.spark.internals import gateway_running, start_gateway

    if gateway_running() or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf()
    for key, value in settings.items():
        conf.set(key, value)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:  # the JVM keeps its own copy of the descriptor
        start_gateway(conf, output)


def _cache_dir() -> Path:
    from ferry.engine.spark.python_workers import default_cache_dir

    return default_cache_dir()


def _class_archive(spark_settings: dict[str, str], create: bool) -> ClassArchive | None:
    """The driver JVM's class data sharing archive, when Spark's home is known."""
    import pyspark

    from ferry.engine.spark import class_archive
    from ferry.engine.spark.python_workers import default_cache_dir, spark_home

    home = spark_home()
    if home is None:
        return None
    try:
        # Full paths: the JVM checks an archive's classpath, so another venv needs its own.
        jars = [os.path.join(home, "jars", name) for name in os.listdir(os.path.join(home, "jars"))]
    except OSError:
        return None
    key = class_archive.archive_key(
        class_archive.java_identity(),
        pyspark.__version__,
        jars,
        spark_settings,
        DRIVER_JVM_OPTIONS,
    )
    return class_archive.plan_archive(default_cache_dir(), key, create)


def _spark_log_config(state_dir: Path) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "log4j2.properties"
    path.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {state_dir / 'spark.log'}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex\n"
    )
    return path
