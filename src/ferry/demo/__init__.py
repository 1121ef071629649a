"""`ferry demo`: two local clusters, traffic, replication and a failover, explained."""

from ferry.demo.tour import run_demo

__all__ = ["run_demo"]
