"""Watching replication from the outside: the sliding-window sync-delay
rule, its sampler, metrics and webhook."""
