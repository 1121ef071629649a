"""Consumer settings for a source across a wide-area link, chosen by its measured round trip.

Pure: the round trip is measured elsewhere (`kafka/round_trip.py`). ferry's consumer defaults
suit clusters a few milliseconds apart: a 1 MiB receive buffer caps one connection at about 1
MiB per round trip (17 MB/s at 60 ms), and 1 MiB per partition per fetch takes several round
trips to drain a backlog. For a source this far or farther, the settings the benchmarks
measured best across a link (docs: Benchmarks, across a WAN) apply, each only where the user
did not set it: on a simulated 60 ms / 200 Mbit/s link they took the backlog copy from 60% of
the link to 87%, and on 100 ms / 1 Gbit/s from 10% to 68%.

And more copy tasks than cores on a local Spark (`wan_task_slots`): a copy task's consumer asks
a broker for all its partitions in one fetch, and every record of the answer waits for the
answer's last byte, so the more partitions a task reads, the longer its records wait on the
link's bandwidth. A task across a link spends its time waiting on round trips, not on a core.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "WAN_CONSUMER",
    "WAN_MAX_TASK_SLOTS",
    "WAN_ROUND_TRIP_MS",
    "WAN_TASKS_PER_CORE",
    "is_far",
    "wan_consumer_settings",
    "wan_task_slots",
]

# Within a datacenter a metadata round trip takes under a millisecond or two; between regions
# tens of milliseconds. At 10 ms a 1 MiB window already caps a connection near 100 MB/s.
WAN_ROUND_TRIP_MS = 10.0
WAN_CONSUMER = {
    "socket.receive.buffer.bytes": "0",  # the OS's autotuning, up to net.ipv4.tcp_rmem's ceiling
    "max.partition.fetch.bytes": "4194304",  # more per fetch: one fetch per round trip
    "fetch.max.bytes": "52428800",
}

# Measured at 60 ms / 200 Mbit/s, 8 partitions at 2,000 records/s of 1 KiB on 2 cores: with 2
# tasks each answer carried 4 partitions (68 KB, 2.7 ms of the link) and p50 was 3 ms above
# MirrorMaker 2's 8 single-partition tasks; with 8 tasks answers were 16 KB and p50 at MM2's.
WAN_TASKS_PER_CORE = 4
# Beyond this many, a machine's cores are already enough tasks for answers to stay short.
WAN_MAX_TASK_SLOTS = 32


def is_far(round_trip_ms: float | None) -> bool:
    """Whether a source measured `round_trip_ms` away (None: not measured) is across a
    wide-area link."""
    return round_trip_ms is not None and round_trip_ms >= WAN_ROUND_TRIP_MS


def wan_task_slots(cores: int) -> int:
    """Task slots of a local Spark that copies from a far source on `cores` cores: a few
    per core, never fewer than the cores."""
    cores = max(1, cores)
    return max(cores, min(WAN_TASKS_PER_CORE * cores, WAN_MAX_TASK_SLOTS))


def wan_consumer_settings(
    round_trip_ms: float | None, user_settings: Mapping[str, str]
) -> dict[str, str]:
    """The WAN settings the user did not set (`user_settings`: the cluster's consumer settings
    as configured), for a source `round_trip_ms` away; none when it is near or not measured."""
    if not is_far(round_trip_ms):
        return {}
    return {key: value for key, value in WAN_CONSUMER.items() if key not in user_settings}
