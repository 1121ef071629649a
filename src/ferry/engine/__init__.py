"""The replication engine: a Spark planner source, a mirror sink, and the runner around them.

Pure planning code (`plan`) and the per-task copy loop (`copier`) import no PySpark; only
`spark_source`, `spark_sink` and `runner` do.
"""
