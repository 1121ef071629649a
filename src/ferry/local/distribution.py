"""The pinned Apache Kafka release: jars from Maven Central, cached outside the repo.

The broker, the perf tools and MirrorMaker 2 are assembled from their jars, downloaded and checked
against the package's jar lock (local/maven.py). The cache is shared by every clone and every
installation (`~/.cache/ferry/kafka-<version>`) and reused when complete.
"""

from __future__ import annotations

import os
from pathlib import Path

from ferry.local.maven import download_bundle, is_complete

__all__ = ["KAFKA_VERSION", "ensure_kafka", "kafka_bundle", "kafka_classpath", "kafka_home"]

KAFKA_VERSION = "4.1.1"


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
    if is_complete(home):
        return home
    return download_bundle(home, kafka_bundle(), f"Apache Kafka {KAFKA_VERSION} jars", quiet=quiet)


def kafka_bundle() -> str:
    """The release's name in the jar lock."""
    return f"kafka-{KAFKA_VERSION}"
