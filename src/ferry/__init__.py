"""ferry: Kafka cross-datacenter replication and disaster recovery, on Apache Spark.

Importing `ferry`, `ferry.config`, `ferry.policy`, `ferry.errors`, `ferry.client` or
`ferry.offsets.consumer_timestamps` never imports PySpark: applications that only need failover
offsets use them as a small client library (see `ferry.client`).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
