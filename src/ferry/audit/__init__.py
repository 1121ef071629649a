"""`ferry audit`: which source records reached the target, which did not, which twice.

`diff` is pure (the rules, ranges and buckets), `spark_job` reads both clusters with Spark's
Kafka connector and applies the rules at scale, `report` prints and writes the result.
"""
