"""The control plane: periodic tasks `ferry run` does beside copying.

Checkpoints and group offset sync, heartbeats, topic config sync, ACL sync and the consumer
timestamps mirror, run by `control_plane.ControlPlane` in one driver thread.
"""
