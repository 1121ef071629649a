"""`python -m bench.wan`: ferry and MirrorMaker 2 replicating across a simulated WAN link.

Two local clusters A and B (`bench.wan.clusters`), each with a listener reached only through a
delay-and-bandwidth proxy (`bench.wan.link`). For each link (`--links`, RTT ms : Mbit/s;
60 ms / 200 Mbit/s and 100 ms / 1 Gbit/s by default) and each case, on fresh topics:

- a backlog (`--records` records of `--value-bytes`, `--partitions` partitions) is preloaded on
  A, the replicator is started with the link between it and A (the placement Kafka's docs
  recommend: next to the target), and the target watched: seconds from process start to the
  first copied record, then MB/s from the first record until the last (and as a share of the
  link's bandwidth), and the bytes the link carried each way per record copied;
- then, the same process still running, `--rate` records/s on a second topic: `--warmup`
  seconds, then `--seconds` timed; p50/p99 of target append time minus source timestamp
  (`bench.latency`) and the link's bytes per record.
- after the cases of each link, the floor measured (`bench.wan.floor`, `--no-floor` skips
  it): a bare consumer with ferry's WAN settings reading the same steady rate across the link,
  its receive time minus the source timestamp.

Cases: ferry and MM2, each with its defaults and with the WAN settings (`bench.wan.cases`);
then, on the first link, both with the WAN settings placed next to the source, producing
across the link (the link in front of B). Finally the link's own ceiling: Kafka's
ConsumerPerformance reading a preloaded topic directly, through the proxy with no delay, and
through the fastest link.

Writes wan.json, wan.md and wan.png to `--out` (bench/results). `--merge` keeps an earlier
wan.json's runs that this run did not repeat (to measure links one at a time). `--quick`: one
link, a small backlog, short windows, results under $TMPDIR/ferry-bench-wan-quick.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import java_tools
from bench.engine_once import machine_info
from bench.harness import (
    cleanup_topics,
    compile_ferry,
    create_topic,
    make_values,
    preload,
    warm_up,
)
from bench.stats import MB
from bench.wan import report
from bench.wan.cases import (
    FERRY_WAN,
    MM2_WAN,
    TARGET_BROKER_WAN,
    cases_for,
    profile_cases,
    with_settings,
)
from bench.wan.clusters import WanCluster, WanClusters, wan_clusters
from bench.wan.floor import measure_floor
from bench.wan.link import LinkProcess, LinkSpec, parse_links
from bench.wan.model import OsBuffers, Windows, effective_buffer
from bench.wan.run import Plan, measure_case, note

RESULTS = Path(__file__).resolve().parent.parent / "results"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--links", default="60:200,100:1000", help="RTT_MS:MBIT_PER_S,...")
    add("--records", type=int, default=300_000, help="backlog records per case")
    add("--value-bytes", type=int, default=1024)
    add("--partitions", type=int, default=8)
    add("--rate", type=float, default=2000.0, help="steady records/s for latency")
    add("--warmup", type=float, default=10.0, help="seconds of steady traffic before timing")
    add("--seconds", type=float, default=30.0, help="timed seconds at the steady rate")
    add("--backlog-timeout", type=float, default=240.0, help="seconds of backlog copy at most")
    add("--mm2-tasks", type=int, default=8)
    add("--replicators", default="ferry,mm2")
    add("--settings", default="default,wan")
    add(
        "--near-source",
        choices=("first", "all", "none"),
        default="first",
        help="links on which to run the placement next to the source",
    )
    add("--no-ceiling", action="store_true", help="skip measuring the link's own ceiling")
    add(
        "--no-floor",
        action="store_true",
        help="skip the measured floor: a bare consumer with ferry's WAN settings reading the "
        "steady rate across each link (bench.wan.floor)",
    )
    add("--merge", action="store_true", help="keep earlier runs in wan.json not repeated now")
    add("--quick", action="store_true", help="a smoke check: one link, small, short")
    add(
        "--profile",
        action="store_true",
        help="what adds to ferry's latency: ferry with the WAN settings and one change at a "
        "time (bench.wan.cases.PROFILE_VARIANTS) on each link, the base case alone on a 0 ms "
        "link; a small backlog; writes wan-profile.{json,md}",
    )
    add(
        "--profile-placement",
        choices=("near-target", "near-source"),
        default="near-target",
        help="with --profile: where ferry runs (near-source: its producer crosses the link; "
        "writes wan-profile-near-source.{json,md})",
    )
    add(
        "--ferry-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line of ferry's config added to every ferry case (repeatable); the cases' "
        "labels say so",
    )
    add("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.links = args.links if args.links != "60:200,100:1000" else "60:200"
        args.records = min(args.records, 50_000)
        args.warmup, args.seconds = 3.0, 10.0
        args.out = args.out or Path(os.environ.get("TMPDIR", "/tmp")) / "ferry-bench-wan-quick"
    if args.profile:
        args.links = args.links if args.links != "60:200,100:1000" else "0:100000,60:200"
        args.records = min(args.records, 20_000)
        args.no_ceiling = True
    args.name = "wan" if not args.profile else "wan-profile"
    if args.profile and args.profile_placement == "near-source":
        args.name = "wan-profile-near-source"
    args.earlier = None  # an earlier results file, read once (--merge)
    args.out = args.out or RESULTS
    return args


def link_ceiling(
    clusters: WanClusters,
    spec: LinkSpec,
    records: int,
    values: list[bytes],
    work: Path,
    os_buffers: OsBuffers,
) -> list[dict[str, Any]]:
    """ConsumerPerformance over loopback, through the proxy with no delay and through `spec`:
    what the Python proxy itself reaches on this machine."""
    a = clusters.a
    topic = f"wan-ceiling-{uuid.uuid4().hex[:8]}"
    create_topic(a.local, topic, 8)
    try:
        payload = preload(a.local, topic, 8, records, values)
        record_bytes = payload / records
        config = java_tools.write_properties(
            work / "ceiling-consumer.properties",
            {
                "receive.buffer.bytes": "-1",
                "max.partition.fetch.bytes": "4194304",
                "fetch.max.bytes": "52428800",
            },
        )
        wide = effective_buffer(-1, os_buffers)
        windows = Windows(wide, wide)
        paths: list[tuple[str, LinkSpec | None]] = [
            ("loopback, no proxy", None),
            ("the proxy, no delay or bandwidth limit", LinkSpec(0.0, 1e12)),
            (f"the proxy as {spec.label}", spec),
        ]
        results = []
        for name, path_spec in paths:
            results.append(
                _perf(a, name, path_spec, topic, records, record_bytes, config, windows, work)
            )
            note(f"  ceiling, {name}: {results[-1]['mb_per_s']:.1f} MB/s")
        return results
    finally:
        cleanup_topics(a.local, [topic])


def _perf(
    a: WanCluster,
    name: str,
    spec: LinkSpec | None,
    topic: str,
    records: int,
    record_bytes: float,
    config: Path,
    windows: Windows,
    work: Path,
) -> dict[str, Any]:
    log_config = java_tools.write_log_config(work, "ceiling")
    link = LinkProcess(a.wan_port, spec, windows, listen_port=a.link_port).start() if spec else None
    try:
        bootstrap = a.remote if link else a.local
        command = java_tools.consumer_perf_command(bootstrap, topic, records, config, log_config)
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"ConsumerPerformance failed:\n{done.stderr[-2000:]}")
        rate = java_tools.parse_consumer_perf(done.stdout).records_per_second
    finally:
        if link:
            link.stop()
    mb_per_s = rate * record_bytes / MB
    return {
        "path": name,
        "mb_per_s": round(mb_per_s, 1),
        "link_share": round(mb_per_s * MB / spec.bandwidth, 3) if spec and spec.rtt else None,
    }


def write_results(
    args: argparse.Namespace,
    plan: Plan,
    os_buffers: OsBuffers,
    runs: list[dict[str, Any]],
    ceiling: list[dict[str, Any]],
    seconds: float,
) -> str:
    """`<name>.json`, `.md` (and for the main run `wan.png`) under `--out`; the markdown."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    name = args.name
    earlier: dict[str, Any] = {}
    if args.merge and args.earlier is not None:
        earlier = args.earlier
    elif args.merge and (out / f"{name}.json").exists():
        earlier = args.earlier = json.loads((out / f"{name}.json").read_text())
    if earlier:
        runs = report.merge_runs(earlier.get("runs", []), runs)
        ceiling = ceiling or earlier.get("proxy_ceiling", [])
        seconds += float(earlier.get("seconds", 0))
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(local=True),
        "plan": {**plan.__dict__, "value_bytes": args.value_bytes},
        "os_buffers": os_buffers.__dict__,
        "settings": {
            "ferry wan (A.consumer.*)": FERRY_WAN,
            "mm2 wan (A.consumer.*)": MM2_WAN,
            "mm2 default": "Kafka's consumer defaults; B.producer.* as ferry's defaults",
            "target broker (B)": TARGET_BROKER_WAN,
        },
        "runs": runs,
        "proxy_ceiling": ceiling,
        "seconds": seconds,
    }
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    text = report.markdown(result, None if args.profile else "wan.png")
    (out / f"{name}.md").write_text(text)
    if not args.profile:
        report.chart(runs, out / "wan.png")
    return text


def main() -> int:
    args = parse_args()
    links = parse_links(args.links)
    plan = Plan(
        args.records,
        args.partitions,
        args.rate,
        args.warmup,
        args.seconds,
        args.backlog_timeout,
        args.mm2_tasks,
    )
    os_buffers = OsBuffers.read()
    compile_ferry()
    began = time.monotonic()
    values = make_values(args.value_bytes)
    runs: list[dict[str, Any]] = []
    ceiling: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ferry-bench-wan-") as tmp:
        work = Path(tmp)
        with wan_clusters(work / "clusters", {"B": TARGET_BROKER_WAN}) as clusters:
            warm_up(clusters.a.local)
            warm_up(clusters.b.local)
            for index, spec in enumerate(links):
                if args.profile:
                    cases = profile_cases(args.profile_placement)
                    cases = cases[: 1 if spec.rtt == 0 else None]
                else:
                    cases = cases_for(args, index == 0)
                cases = [with_settings(case, args.ferry_setting) for case in cases]
                for case in cases:
                    try:
                        runs.append(
                            measure_case(case, spec, clusters, plan, values, work, os_buffers)
                        )
                        # After every case: a run cut short still leaves what it measured.
                        write_results(args, plan, os_buffers, runs, [], time.monotonic() - began)
                    except Exception as exc:  # recorded; the other cases still run
                        note(f"{spec.label} {case.label} failed: {exc}")
                        runs.append(
                            {
                                "link": spec.label,
                                "rtt_ms": spec.rtt * 1000,
                                "bandwidth_mbit": spec.bandwidth_bits / 1e6,
                                "replicator": case.replicator,
                                "settings": case.settings,
                                "placement": case.placement,
                                "label": case.label,
                                "variant": case.variant,
                                "window_to_client": 0,
                                "window_to_server": 0,
                                "error": str(exc)[:2000],
                            }
                        )
                if not args.no_floor and not (
                    args.profile and args.profile_placement == "near-source"
                ):
                    try:
                        runs.append(measure_floor(spec, clusters, plan, values, os_buffers))
                    except Exception as exc:  # the replicators' figures stand without it
                        note(f"{spec.label} bare consumer failed: {exc}")
                    write_results(args, plan, os_buffers, runs, [], time.monotonic() - began)
            if not args.no_ceiling:
                fastest = max(links, key=lambda s: s.bandwidth_bits)
                ceiling = link_ceiling(
                    clusters, fastest, min(args.records, 200_000), values, work, os_buffers
                )
    text = write_results(args, plan, os_buffers, runs, ceiling, time.monotonic() - began)
    print(text)
    return 1 if any("error" in r for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
