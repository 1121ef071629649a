"""One case of the WAN benchmark, measured: a backlog copied across the link, then latency at
a steady rate, with the bytes the link carried each way."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import TopicCounter, cleanup_topics, create_topic, preload
from bench.latency import TIMED_KEY, WARM_UP_KEY, PacedProducer, end_offsets, read_latencies
from bench.replicators import Ferry, MirrorMaker2
from bench.stats import MB, latency_summary
from bench.wan.cases import Case, WanMirrorMaker2, case_windows, replicator_for
from bench.wan.clusters import WanClusters
from bench.wan.link import LinkProcess, LinkSpec
from bench.wan.model import OsBuffers

__all__ = ["Plan", "measure_case", "note", "steady_figures"]

POLL = 0.1


@dataclass(frozen=True)
class Plan:
    """The sizes every case shares."""

    records: int  # backlog
    partitions: int
    rate: float  # steady records per second
    warmup: float  # seconds of steady traffic before the timed window
    seconds: float  # the timed window
    backlog_timeout: float  # the backlog's rate is taken from what was copied by then
    mm2_tasks: int


def note(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _bootstraps(case: Case, clusters: WanClusters) -> tuple[str, str]:
    if case.placement == "near-target":
        return clusters.a.remote, clusters.b.local
    return clusters.a.local, clusters.b.remote


def measure_case(
    case: Case,
    spec: LinkSpec,
    clusters: WanClusters,
    plan: Plan,
    values: list[bytes],
    work: Path,
    os_buffers: OsBuffers,
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    backlog, steady = f"wan-backlog-{tag}", f"wan-steady-{tag}"
    source, target = clusters.a.local, clusters.b.local
    replicator = replicator_for(case, _bootstraps(case, clusters), plan.mm2_tasks)
    create_topic(source, backlog, plan.partitions)
    create_topic(source, steady, plan.partitions)
    # The copies get the target's append time (bench.latency).
    steady_copy = replicator.target(steady)
    create_topic(target, steady_copy, plan.partitions, {"message.timestamp.type": "LogAppendTime"})
    behind = clusters.a if case.placement == "near-target" else clusters.b
    windows = case_windows(case, os_buffers, clusters.b.settings, spec.rtt * 1000)
    result: dict[str, Any] = {
        "link": spec.label,
        "rtt_ms": spec.rtt * 1000,
        "bandwidth_mbit": spec.bandwidth_bits / 1e6,
        "replicator": case.replicator,
        "settings": case.settings,
        "placement": case.placement,
        "label": case.label,
        "variant": case.variant,
        "source_settings": case.source_settings(),
        "extra_settings": list(case.extra),
        "window_to_client": windows.to_client,
        "window_to_server": windows.to_server,
    }
    counter = TopicCounter(target)
    try:
        note(f"{spec.label} {case.label}: preloading {plan.records:,} records")
        payload = preload(source, backlog, plan.partitions, plan.records, values)
        record_bytes = payload / plan.records
        with LinkProcess(behind.wan_port, spec, windows, listen_port=behind.link_port) as link:
            run_dir = work / f"{case.replicator}-{case.settings}-{tag}"
            proc = replicator.start(run_dir, f"{backlog},{steady}", once=False)
            try:
                result.update(
                    _backlog(proc, counter, replicator, backlog, plan, link, spec, record_bytes)
                )
                if result["backlog_complete"]:
                    result.update(
                        _steady(
                            proc,
                            counter,
                            replicator,
                            steady,
                            steady_copy,
                            plan,
                            link,
                            values,
                            clusters,
                            work,
                        )
                    )
                result["connections"] = link.connections
                result["cpu_seconds"] = round(proc.cpu_seconds, 1)
                result["peak_rss_mb"] = round(proc.sampler.peak_rss_bytes / 1e6)
            finally:
                proc.stop(grace=10)
    finally:
        counter.close()
        internal = replicator.internal_topics() if isinstance(replicator, WanMirrorMaker2) else []
        cleanup_topics(target, [replicator.target(backlog), steady_copy, *internal])
        cleanup_topics(source, [backlog, steady])
    return result


def _backlog(
    proc: Any,
    counter: TopicCounter,
    replicator: Ferry | MirrorMaker2,
    backlog: str,
    plan: Plan,
    link: LinkProcess,
    spec: LinkSpec,
    record_bytes: float,
) -> dict[str, Any]:
    """Until the target holds the backlog (or the timeout): time to the first record, the
    rate from the first record on, and the link's bytes per record meanwhile."""
    copy = replicator.target(backlog)
    first: float | None = None
    first_held = 0
    first_counts = (0, 0)
    held = 0
    while True:
        proc.sample()
        held = counter.count(copy)
        now = time.monotonic()
        if held > 0 and first is None:
            first, first_held, first_counts = now, held, link.counts()
        if held >= plan.records:
            break
        if first is not None and now - first > plan.backlog_timeout:
            break
        if first is None and now - proc.began > plan.backlog_timeout + 180:
            raise TimeoutError(f"{replicator.name}: no record copied within the timeout")
        code = proc.poll()
        if code is not None:
            raise RuntimeError(f"{proc.log.name} exited {code}:\n{proc.stderr_tail()}")
        time.sleep(POLL)
    assert first is not None
    seconds = max(1e-3, now - first)
    copied = held - first_held
    to_server, to_client = (a - b for a, b in zip(link.counts(), first_counts, strict=True))
    mb_per_s = copied * record_bytes / MB / seconds
    note(
        f"  backlog: first record after {first - proc.began:.1f} s, {held:,} of "
        f"{plan.records:,} in {seconds:.1f} s: {mb_per_s:.1f} MB/s"
    )
    return {
        "backlog_records": plan.records,
        "backlog_complete": held >= plan.records,
        "first_record_seconds": round(first - proc.began, 2),
        "backlog_seconds": round(seconds, 2),
        "backlog_mb_per_s": round(mb_per_s, 2),
        "backlog_link_share": round(mb_per_s * MB / spec.bandwidth, 3),
        "backlog_bytes_per_record_to_client": round(to_client / max(1, copied), 1),
        "backlog_bytes_per_record_to_server": round(to_server / max(1, copied), 1),
        "record_bytes": round(record_bytes, 1),
    }


def _steady(
    proc: Any,
    counter: TopicCounter,
    replicator: Ferry | MirrorMaker2,
    steady: str,
    steady_copy: str,
    plan: Plan,
    link: LinkProcess,
    values: list[bytes],
    clusters: WanClusters,
    work: Path,
) -> dict[str, Any]:
    """Latency at `plan.rate` records/s: warm-up, then a timed window."""
    producer = PacedProducer(clusters.a.local, steady, plan.partitions, values)
    # The replicator copies the steady topic (and ferry's Spark tasks do, not its driver).
    producer.burst(WARM_UP_KEY, plan.partitions)
    deadline = time.monotonic() + 180
    run_dir = proc.log.parent
    while counter.count(steady_copy) < plan.partitions or not replicator.steady(run_dir):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{replicator.name} did not copy {steady} within 180 s")
        proc.sample()
        time.sleep(POLL)
    warm = plan.partitions + producer.paced(WARM_UP_KEY, plan.rate, plan.warmup)
    # Timed records land after these ends (warm-up ones after them are told apart by key).
    copy_starts = end_offsets(clusters.b.local, steady_copy)
    before = link.counts()
    proc.sample(force=True)
    cpu_before = proc.cpu_seconds
    began = time.monotonic()
    timed = producer.paced(TIMED_KEY, plan.rate, plan.seconds)
    window = time.monotonic() - began
    proc.sample(force=True)
    cpu_share = (proc.cpu_seconds - cpu_before) / window
    after = link.counts()
    _wait_for(counter, steady_copy, warm + timed, 120, replicator.name)
    latencies = read_latencies(clusters.b.local, steady_copy, timed, starts=copy_starts)
    summary = latency_summary(latencies)
    note(
        f"  steady {plan.rate:,.0f}/s: p50 {summary['p50_ms']:.0f} ms, "
        f"p99 {summary['p99_ms']:.0f} ms, max {summary['max_ms']:.0f} ms"
    )
    return {
        "steady_seconds": round(window, 1),
        **steady_figures(plan.rate, timed, latencies, before, after),
        # The replicator's CPU seconds per second while the timed records were produced.
        "steady_cpu_share": round(cpu_share, 3),
        "steady_link_mbit": round(
            (after[0] + after[1] - before[0] - before[1]) * 8 / window / 1e6, 2
        ),
    }


def steady_figures(
    rate: float,
    timed: int,
    latencies: list[float],
    before: tuple[int, ...],
    after: tuple[int, ...],
) -> dict[str, Any]:
    """A steady window's percentiles and the link's bytes per record each way (`before` and
    `after`: the link's counts, to server then to client)."""
    summary = latency_summary(latencies)
    return {
        "steady_rate": rate,
        "steady_records": timed,
        **{key: summary[key] for key in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")},
        "steady_bytes_per_record_to_client": round((after[1] - before[1]) / timed, 1),
        "steady_bytes_per_record_to_server": round((after[0] - before[0]) / timed, 1),
    }


def _wait_for(counter: TopicCounter, topic: str, expected: int, timeout: float, who: str) -> None:
    deadline = time.monotonic() + timeout
    while (held := counter.count(topic)) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{who}: {topic} holds {held} of {expected} after {timeout:.0f} s")
        time.sleep(POLL)
