"""The session Spark runs Python tasks on loopback with this venv's interpreter."""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_python_tasks_run_in_this_interpreter(spark: Any) -> None:
    rdd = spark.sparkContext.parallelize(range(10), 2)
    # The venv may be reached as bin/python or bin/python3.11; sys.prefix names the venv.
    prefixes = set(rdd.map(lambda _: __import__("sys").prefix).collect())
    assert prefixes == {sys.prefix}
    assert sys.prefix != sys.base_prefix, "tests must run inside the project's venv"
    assert rdd.map(lambda x: x * x).sum() == 285
    assert spark.sparkContext.master == "local[2,4]"
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert spark.conf.get("spark.ui.enabled") == "false"
