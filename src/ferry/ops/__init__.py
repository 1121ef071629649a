"""What operators ask of a replication from any machine: `ferry status` and `ferry doctor`."""
