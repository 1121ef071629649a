"""Watching replication from the outside: seed 001's sync-delay detector and its sampler."""
