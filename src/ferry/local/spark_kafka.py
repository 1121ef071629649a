"""Spark's Kafka connector (`spark-sql-kafka-0-10`), fetched once from Maven Central.

`ferry audit` reads both clusters with it. pyspark ships Spark's jars but not this connector,
so `ferry local provision` (run by `make setup`) downloads it and the jars it needs beyond
pyspark's own, as the package's jar lock pins them, into a per-user cache; `ferry audit` then
needs no network (it provisions them itself when they are missing).

The connector must match pyspark's Scala version exactly (read from pyspark's
`scala-library` jar) and its Spark major version. Maven Central's newest connector is 4.2.0
while pyspark is 4.3.0, so the version is pinned here and a connector of the same major is
accepted; the audit's integration test is what shows the pair works.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ferry.errors import LocalClusterError
from ferry.local.maven import download_bundle, is_complete

__all__ = [
    "ARTIFACTS",
    "SPARK_KAFKA_VERSION",
    "ensure_spark_kafka",
    "scala_binary_version",
    "spark_kafka_bundle",
    "spark_kafka_jars",
]

SPARK_KAFKA_VERSION = "4.2.0"
# Only these: the rest of the connector's dependencies (Scala, Hadoop, compression codecs) are
# in pyspark's jars already, and a second, older copy on the classpath would shadow them.
ARTIFACTS = (
    "spark-sql-kafka-0-10_{scala}",
    "spark-token-provider-kafka-0-10_{scala}",
    "kafka-clients",
    "commons-pool2",
)


def scala_binary_version() -> str:
    """pyspark's Scala binary version (`2.13`), from the scala-library jar it ships: beside the
    pyspark package when pip installed it, or in `$SPARK_HOME/jars` when `spark-submit` runs
    ferry (pyspark is then imported from Spark's `pyspark.zip`, which holds no jars)."""
    import pyspark

    folders = [Path(pyspark.__file__).parent / "jars"]
    if os.environ.get("SPARK_HOME"):
        folders.append(Path(os.environ["SPARK_HOME"]) / "jars")
    for jars in folders:
        for name in sorted(os.listdir(jars)) if jars.is_dir() else ():
            match = re.fullmatch(r"scala-library-(\d+)\.(\d+)\.\d+\.jar", name)
            if match:
                return f"{match[1]}.{match[2]}"
    raise LocalClusterError(
        "no scala-library jar in "
        + " or ".join(str(f) for f in folders)
        + ": is pyspark (or Spark at $SPARK_HOME) installed completely?"
    )


def _home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "ferry" / spark_kafka_bundle(scala_binary_version())


def spark_kafka_bundle(scala: str) -> str:
    """The connector's name in the jar lock (and its cache folder's)."""
    return f"spark-sql-kafka-{SPARK_KAFKA_VERSION}_{scala}"


def spark_kafka_jars() -> list[Path]:
    """The connector's jars, provisioning them first if needed."""
    libs = ensure_spark_kafka() / "libs"
    return sorted(libs.glob("*.jar"))


def ensure_spark_kafka(*, quiet: bool = True) -> Path:
    """Fetch the connector once; later calls only check the completion mark."""
    import pyspark

    home = _home()
    if is_complete(home):
        return home
    if pyspark.__version__.split(".")[0] != SPARK_KAFKA_VERSION.split(".")[0]:
        raise LocalClusterError(
            f"Spark's Kafka connector {SPARK_KAFKA_VERSION} does not fit pyspark "
            f"{pyspark.__version__} (another major version); set SPARK_KAFKA_VERSION in "
            "ferry.local.spark_kafka to a connector of pyspark's version"
        )
    scala = scala_binary_version()
    return download_bundle(
        home,
        spark_kafka_bundle(scala),
        f"Spark's Kafka connector {SPARK_KAFKA_VERSION} (Scala {scala})",
        quiet=quiet,
    )
