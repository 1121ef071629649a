"""How far a cluster is: the time of one metadata request on a connection already open.

A request on an open connection costs one round trip plus the broker's work, which for the
metadata of one topic is well under a millisecond; the least of a few such requests is the
link's round trip as a client sees it (TCP's handshake would not do: a proxy or load balancer
in front of the brokers answers it nearby).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException

from ferry.kafka import clients

__all__ = ["round_trip_ms"]

# A topic every cluster has; its metadata is small whatever the cluster holds.
_PROBE_TOPIC = "__consumer_offsets"


def round_trip_ms(
    admin_settings: Mapping[str, Any], timeout: float, probes: int = 3
) -> float | None:
    """The least of `probes` timed metadata requests to the cluster, in ms, after one that
    opens the connection; None when it does not answer within `timeout` each."""
    admin = clients.admin_client(admin_settings)
    try:
        admin.list_topics(_PROBE_TOPIC, timeout=timeout)  # connects (and authenticates)
        times = []
        for _ in range(probes):
            began = time.monotonic()
            admin.list_topics(_PROBE_TOPIC, timeout=timeout)
            times.append((time.monotonic() - began) * 1000)
        return min(times)
    except KafkaException:
        return None
