"""How many task slots Spark has right now: the cores of the executors registered with it.

`defaultParallelism` is fixed by `spark.default.parallelism` when set, and on a cluster it is
never below 2, so it cannot say that one of two one-core workers died. The scheduler backend
of a cluster (standalone, YARN, Kubernetes) counts the cores of live executors; a local
master has no such count and its cores never change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ferry.engine.spark.internals import total_executor_cores

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["available_cores"]


def available_cores(spark: SparkSession) -> int:
    cores = total_executor_cores(spark)
    if cores is None:
        return int(spark.sparkContext.defaultParallelism)
    return max(cores, 0)
