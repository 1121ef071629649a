"""The edge to Kafka: client logging, error mapping, retries, and the records ferry writes.

Imports no PySpark and nothing of the engine: the offset client, the control-plane tasks, the
monitor and the engine all build on this layer. Wire formats own their encoding:
`mm2_records` (MM2's checkpoints and heartbeats, byte for byte), `offset_runs` (ferry's exact
offset runs) and `provenance` (the `ferry.origin` header).
"""
