"""The replication engine, in three layers and a runner.

- `plan`: what a micro-batch copies (admission control, bins: pure) and the remote topics
  that must exist before it does.
- `copy`: the per-task copy loops (Python and native), their shared types, delivery reports,
  exactly-once transactions and the clients cached per Python worker. No PySpark.
- `spark`: the Spark side: session settings, the planner source, the mirror sink, the Python
  worker daemon and the driver JVM's class archive.
- `runner`: `ferry run`'s engine: one streaming query per flow (`flow_query`), copying in
  leases by default, started after the `preflight` checks, watched, restarted with backoff or
  kept failed (`flow_supervisor`, pure), everything beside it closed in reverse order.
"""
