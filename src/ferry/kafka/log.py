"""librdkafka's own log lines go to Python logging, not straight to stderr: one line per change.

A client that cannot reach a broker logs a line per connection attempt (several a second, per
client), and librdkafka prints them raw (`%3|1700000000.123|FAIL|rdkafka#consumer-2| ...`) to
stderr unless the client is given a logger. Every client ferry makes is given one (`quiet`):

- every line goes, unchanged, to the `ferry.librdkafka` logger (silent unless someone adds a
  handler to it: without one, Python's last-resort handler would print them all anyway);
- what a line says about the cluster, unreachable, becomes one line on the `ferry.kafka`
  logger when it changes: `cluster A unreachable, retrying` once however many attempts
  follow, and `cluster A reachable again` once ferry reaches it (`reachable`).

The console speaks of clusters in ferry's own words (see `reachability`); these lines are for
whoever reads ferry's logs, at INFO, so they never reach a console that did not ask for them.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["CLUSTER_LOGGER", "KAFKA_LOGGER", "ClientLog", "name_clusters", "quiet", "reachable"]

KAFKA_LOGGER = logging.getLogger("ferry.librdkafka")
KAFKA_LOGGER.addHandler(logging.NullHandler())
KAFKA_LOGGER.propagate = False
CLUSTER_LOGGER = logging.getLogger("ferry.kafka")

# librdkafka's lines that mean the cluster is not there. Not "Disconnected": brokers close
# idle connections (connections.max.idle.ms), and librdkafka says so without anything wrong;
# a broker that is gone shows as failed reconnects right after.
_UNREACHABLE = re.compile(
    r"Connect to .* failed|brokers are down|Failed to resolve|timed out in state CONNECT",
    re.IGNORECASE,
)

_lock = threading.Lock()
_names: dict[str, str] = {}  # bootstrap.servers -> alias
_down: set[str] = set()


def name_clusters(bootstraps: Mapping[str, str]) -> None:
    """Say `cluster A`, not `cluster 127.0.0.1:9092`: {alias: bootstrap.servers}."""
    with _lock:
        _names.update({bootstrap: alias for alias, bootstrap in bootstraps.items()})


def _name(bootstrap: str) -> str:
    return _names.get(bootstrap, bootstrap)


def reachable(bootstrap_or_alias: str) -> None:
    """ferry reached the cluster: if its clients had said it was unreachable, say it is back."""
    name = _names.get(bootstrap_or_alias, bootstrap_or_alias)
    with _lock:
        if name not in _down:
            return
        _down.discard(name)
    CLUSTER_LOGGER.info("cluster %s reachable again", name)


class ClientLog:
    """The `logger` of one client: librdkafka calls `log(level, format, facility, name, line)`."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def log(self, level: int, msg: str, *args: Any) -> None:
        KAFKA_LOGGER.log(level, msg, *args)
        facility = str(args[0]) if args else ""
        line = str(args[-1]) if args else msg
        if facility in ("FAIL", "ERROR") and _UNREACHABLE.search(line):
            name = _name(self.bootstrap)
            with _lock:
                if name in _down:
                    return
                _down.add(name)
            CLUSTER_LOGGER.info("cluster %s unreachable, retrying", name)


def quiet(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with librdkafka's log routed through `ClientLog` (see above)."""
    return {**settings, "logger": ClientLog(str(settings.get("bootstrap.servers", "")))}
