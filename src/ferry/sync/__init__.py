"""What ferry keeps in sync beside the records: the control plane of `ferry run`.

Checkpoints and group offset sync, heartbeats, topic config sync, ACL sync, the protection of
remote topics and the consumer timestamps mirror, each run when due by `loop.SyncLoop` in one
driver thread (`ferry run --once` runs them once after copying).
"""
