"""pyspark's private API is reached in one module, ferry.engine.spark.internals: a Spark upgrade
reads it first. Any other module of ferry that reaches past pyspark's public API fails here,
naming the line."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import ferry
from ferry.engine.spark import internals

SOURCE = Path(ferry.__file__).resolve().parent
# SparkContext's and SparkSession's private members, and pyspark's private modules' functions.
PRIVATE = re.compile(
    r"\.(_jsc|_jvm|_gateway|_jdf|_jsparkSession|_jconf|_jsparkContext|_ensure_initialized)\b"
    r"|_find_spark_home|launch_gateway|getattr\([^,]+, \"_(jsc|jvm|gateway|jdf)\""
)


def test_only_the_internals_module_uses_pysparks_private_api() -> None:
    found = [
        f"{path.relative_to(SOURCE)}:{number}: {line.strip()}"
        for path in sorted(SOURCE.rglob("*.py"))
        if path != Path(internals.__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line) and "self._jvm" not in line
    ]
    assert found == []


def test_each_function_says_why_no_public_api_serves() -> None:
    for name in internals.__all__:
        doc = getattr(internals, name).__doc__ or ""
        assert "Why private:" in doc, name


def test_a_spark_home_pyspark_cannot_find_is_none_not_the_end_of_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where pyspark comes from Spark's pyspark.zip with no SPARK_HOME (the driver of a YARN
    cluster-mode application), pyspark's finder prints advice and calls sys.exit(-1), as
    below; ferry then runs on without a Spark home, and prints none of the advice."""
    from pyspark import find_spark_home

    def not_found() -> str:
        print("Could not find valid SPARK_HOME while searching [...]", file=sys.stderr)
        sys.exit(-1)

    monkeypatch.setattr(find_spark_home, "_find_spark_home", not_found)
    assert internals.find_spark_home() is None
    assert capsys.readouterr().err == ""
