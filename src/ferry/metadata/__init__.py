"""Metadata that follows the data: heartbeats, topic configs, status and durability checks."""
