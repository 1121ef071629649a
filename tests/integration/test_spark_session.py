"""The session Spark runs Python tasks on loopback with this venv's interpreter."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_python_tasks_run_in_this_interpreter(spark: Any) -> None:
    rdd = spark.sparkContext.parallelize(range(10), 2)
    executables = set(rdd.map(lambda _: __import__("sys").executable).collect())
    assert executables == {sys.executable}
    assert rdd.map(lambda x: x * x).sum() == 285
    assert spark.sparkContext.master == "local[2]"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert spark.conf.get("spark.ui.enabled") == "false"
