"""The pinned Apache Kafka release: jars from Maven Central, cached outside the repo.

There is no Kafka tarball to download here, only Maven Central, so the broker, the perf tools
and MirrorMaker 2 are assembled from their jars with `mvn dependency:copy-dependencies`. The
cache is shared by every clone (`~/.cache/ferry/kafka-<version>`) and reused when complete.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from ferry.errors import LocalClusterError

__all__ = ["KAFKA_VERSION", "ensure_kafka", "kafka_classpath", "kafka_home"]

KAFKA_VERSION = "4.1.1"
_COMPLETE_MARK = ".complete"


def kafka_home() -> Path:
    """Where the jars live: $FERRY_KAFKA_HOME, or the per-user cache."""
    override = os.environ.get("FERRY_KAFKA_HOME")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "ferry" / f"kafka-{KAFKA_VERSION}"


def kafka_classpath() -> str:
    """Java classpath of the provisioned release; provisions it first if needed."""
    return str(ensure_kafka() / "libs" / "*")


def ensure_kafka(*, quiet: bool = True) -> Path:
    """Provision the pinned release once; later calls only check the completion mark."""
    home = kafka_home()
    if (home / _COMPLETE_MARK).exists():
        return home
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalClusterError(
            "Maven (mvn) is not on PATH; it is needed once to fetch Apache Kafka "
            f"{KAFKA_VERSION} from Maven Central. Install it (apt-get install maven) and rerun."
        )
    home.mkdir(parents=True, exist_ok=True)
    # Copy into a temporary folder and rename, so an interrupted download is never mistaken
    # for a complete one.
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    pom = resources.files("ferry.local").joinpath("kafka-runtime.pom.xml")
    with resources.as_file(pom) as pom_path:
        command = [
            mvn,
            "-B",
            *(["-q"] if quiet else []),
            "-f",
            str(pom_path),
            f"-Dkafka.version={KAFKA_VERSION}",
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
        raise LocalClusterError(
            f"could not fetch Apache Kafka {KAFKA_VERSION} jars from Maven Central "
            f"(mvn exit {result.returncode}):\n{tail}"
        )
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    (home / _COMPLETE_MARK).write_text(KAFKA_VERSION + "\n")
    return home
