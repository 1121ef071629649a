"""One typed configuration model, loaded from `ferry.yaml` or MM2 dedicated-mode `.properties`.

    cfg = load_config("mm2.properties")
    for flow in cfg.enabled_flows:
        cfg.clusters[flow.source].consumer_config()

Importing this package never imports PySpark (clients that only translate offsets use it).
"""

from ferry.config.entries import Entry, entries_from_properties, entries_from_yaml, read_entries
from ferry.config.loader import load_config, parse_entries
from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig, PolicySpec

__all__ = [
    "ClusterConfig",
    "Entry",
    "FerryConfig",
    "FlowConfig",
    "PolicySpec",
    "entries_from_properties",
    "entries_from_yaml",
    "load_config",
    "parse_entries",
    "read_entries",
]
