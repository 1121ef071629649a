"""The latency floor of a link, measured: a bare consumer across it.

The model (`report.floors`) puts p50 at one round trip and p99 at 1.5, and leaves out
everything local. This measures what a plain librdkafka consumer with ferry's source-consumer
settings for a WAN sees across the same link from the same paced producer: its receive time
minus the source timestamp, so the producer's linger and pacing, the source's append and the
proxy are all in it. Whatever a replicator next to the target adds beyond this figure is its
own: the copy, the produce to the target and the target's append.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.harness import cleanup_topics, create_topic
from bench.latency import TIMED_KEY, WARM_UP_KEY, CommittedReader, PacedProducer
from bench.wan.cases import FERRY_WAN, Case, case_windows
from bench.wan.clusters import WanClusters
from bench.wan.link import LinkProcess, LinkSpec
from bench.wan.model import OsBuffers
from bench.wan.run import Plan, note, steady_figures
from ferry.engine.copy.client_settings import CONSUMER_DEFAULTS

__all__ = ["measure_floor"]

# ferry's source consumer with the WAN settings (its fetch wait included), read_uncommitted
# as at-least-once copying reads.
READER_SETTINGS = {
    **CONSUMER_DEFAULTS,
    **FERRY_WAN,
    "isolation.level": "read_uncommitted",
}


def measure_floor(
    spec: LinkSpec, clusters: WanClusters, plan: Plan, values: list[bytes], os_buffers: OsBuffers
) -> dict[str, Any]:
    """One steady window (`plan.rate`, warm-up then timed) read across the link in front of A."""
    topic = f"wan-floor-{uuid.uuid4().hex[:8]}"
    create_topic(clusters.a.local, topic, plan.partitions)
    windows = case_windows(Case("ferry", "wan", "near-target"), os_buffers)
    try:
        with LinkProcess(
            clusters.a.wan_port, spec, windows, listen_port=clusters.a.link_port
        ) as link:
            reader = CommittedReader(clusters.a.remote, topic, READER_SETTINGS).start()
            try:
                producer = PacedProducer(clusters.a.local, topic, plan.partitions, values)
                producer.burst(WARM_UP_KEY, plan.partitions)
                deadline = time.monotonic() + 60
                while reader.received < plan.partitions:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"a consumer across {spec.label} read nothing in 60 s")
                    time.sleep(0.1)
                producer.paced(WARM_UP_KEY, plan.rate, plan.warmup)
                before = link.counts()
                timed = producer.paced(TIMED_KEY, plan.rate, plan.seconds)
                reader.wait_for(timed, 60)
                after = link.counts()
                latencies = reader.stop()
            finally:
                reader.close()
    finally:
        cleanup_topics(clusters.a.local, [topic])
    figures = steady_figures(plan.rate, timed, latencies, before, after)
    note(
        f"{spec.label} bare consumer: p50 {figures['p50_ms']:.0f} ms, "
        f"p99 {figures['p99_ms']:.0f} ms"
    )
    return {
        "link": spec.label,
        "rtt_ms": spec.rtt * 1000,
        "bandwidth_mbit": spec.bandwidth_bits / 1e6,
        "replicator": "consumer",
        "settings": "wan",
        "placement": "near-target",
        "label": "bare consumer (the floor, measured)",
        "variant": "",
        "source_settings": dict(FERRY_WAN),
        "extra_settings": [],
        "window_to_client": windows.to_client,
        "window_to_server": windows.to_server,
        **figures,
    }
