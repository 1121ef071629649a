"""Which Scala build of Spark's Kafka connector ferry needs, read off the Spark it runs with."""

from __future__ import annotations

from pathlib import Path

import pyspark
import pytest

from ferry.errors import LocalClusterError
from ferry.local.spark_kafka import scala_binary_version


def test_read_beside_the_installed_pyspark() -> None:
    assert scala_binary_version() == "2.13"  # pyspark 4 ships Scala 2.13 only


def test_under_spark_submit_it_is_read_from_spark_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spark-submit puts Spark's pyspark.zip first on the path: no jars beside the package."""
    zipped = tmp_path / "python" / "lib" / "pyspark.zip" / "pyspark" / "__init__.py"
    monkeypatch.setattr(pyspark, "__file__", str(zipped))
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "scala-library-2.12.18.jar").write_bytes(b"")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert scala_binary_version() == "2.12"

    monkeypatch.delenv("SPARK_HOME")
    with pytest.raises(LocalClusterError, match=r"no scala-library jar in .*pyspark\.zip"):
        scala_binary_version()
