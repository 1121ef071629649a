"""librdkafka's own log lines go to Python logging, not straight to stderr.

A client that cannot reach a broker logs a line per connection attempt (several a second). For
the command line that is noise on top of the one precise error ferry prints; the lines stay
available under the `ferry.librdkafka` logger.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["KAFKA_LOGGER", "quiet"]

KAFKA_LOGGER = logging.getLogger("ferry.librdkafka")
# Silent unless someone asks: without a handler of its own, Python's last-resort handler
# would print every line to stderr anyway. Add a handler to this logger to see them.
KAFKA_LOGGER.addHandler(logging.NullHandler())
KAFKA_LOGGER.propagate = False


def quiet(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with librdkafka's log routed to the `ferry.librdkafka` logger."""
    return {**settings, "logger": KAFKA_LOGGER}
