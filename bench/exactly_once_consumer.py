"""Exactly-once latency as consumers see it: ferry and MirrorMaker 2, each with exactly-once.

Two local clusters A and B, their transaction paths exercised first (`--warm-transactions`
seconds of transactions on each, no replicator taking part: the first run after the clusters
started was measured two to five times slower at p99 than the later ones). For each run
(`--runs`, in that order), a fresh source topic on A and its target topic on B (created with
`message.timestamp.type=LogAppendTime`), a `read_committed` consumer of the target reading
throughout (bench.latency.CommittedReader), then the replicator, started and kept running
while a producer writes `--rate` records/s of `--value-bytes` (each value carries its source
timestamp): a warm-up (not timed), then
`--seconds` timed. Per run, over the timed records:

- latency at the target's append: the copy's LogAppendTime minus the source timestamp;
- latency at the read_committed consumer: its receive time minus the source timestamp (what
  an exactly-once consumer sees; for at-least-once runs the same consumer, which there reads
  what a read_uncommitted one does);
- p50, p90, p99, p99.9 and max of both; the CPU share of the replicator's process tree during
  the timed window (CPU seconds per wall second; 1.0 = one core);
- the transactional ids the target's coordinators list for this run's writers (Kafka's
  `kafka-transactions.sh list`, asked while the replicator runs), and the transaction markers
  in the target topic (its offsets minus the records it holds): proof that transactions
  were written, and how many committed per second.

Runs: `ferry-eos[:MS]` (ferry exactly-once; MS sets `ferry.commit.interval.ms`, else ferry's
default), `mm2-eos` (MirrorMaker 2 dedicated mode with exactly-once engaged, see
bench.java_tools.mm2_exactly_once_settings), `ferry-alos`, `mm2-alos` (each at-least-once,
its defaults). Writes bench/results/<name>.json, .md and .png (`--merge` keeps the runs
already in <name>.json, so runs of several invocations end up side by side).

    flock /tmp/ferry-heavy.lock .venv/bin/python -m bench.exactly_once_consumer \\
        --runs ferry-eos,mm2-eos,ferry-eos:50
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import java_tools
from bench.harness import (
    TRANSACTION_WARM_UP_SECONDS,
    MeasuredProcess,
    TopicCounter,
    cleanup_topics,
    compile_ferry,
    create_topic,
    local_clusters,
    make_values,
    sample_in_background,
    wait_for_count,
    warm_transaction_paths,
    warm_up,
)
from bench.latency import (
    CONSUMER_SETTINGS,
    TIMED_KEY,
    WARM_UP_KEY,
    CommittedReader,
    PacedProducer,
    end_offsets,
    read_latencies,
)
from bench.replicators import Ferry, MirrorMaker2
from bench.stats import MB, latency_summary
from ferry.config.model import FlowConfig

RESULTS = Path(__file__).resolve().parent / "results"
NAME = "exactly-once-consumer"
READY_SECONDS = 240.0  # replicator start until the consumer received the first records
KINDS = ("ferry-eos", "mm2-eos", "ferry-alos", "mm2-alos")
LABELS = {
    "ferry-eos": "ferry exactly-once",
    "mm2-eos": "MirrorMaker 2 exactly-once",
    "ferry-alos": "ferry at-least-once",
    "mm2-alos": "MirrorMaker 2 at-least-once",
}


def note(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class RunSpec:
    """One run of `--runs`: `kind` (KINDS), and for ferry-eos the commit interval (None:
    ferry's default)."""

    kind: str
    commit_interval_ms: int | None = None
    extra: tuple[str, ...] = ()  # more `key=value` lines of ferry's config (--ferry-setting)

    @property
    def label(self) -> str:
        if self.kind.startswith("ferry"):
            more = "".join(f", {line}" for line in self.extra)
            return f"{LABELS[self.kind]}, commit interval {self.interval_ms} ms{more}"
        return LABELS[self.kind]

    @property
    def exactly_once(self) -> bool:
        return self.kind.endswith("-eos")

    @property
    def interval_ms(self) -> int:
        """The commit interval ferry runs with (given, or its default for the mode)."""
        if self.commit_interval_ms is not None:
            return self.commit_interval_ms
        mode = "enabled" if self.exactly_once else "disabled"
        default = FlowConfig(source="A", target="B", exactly_once_source_support=mode)
        return round(default.commit_interval * 1000)

    def ferry_settings(self) -> list[str]:
        settings = []
        if self.exactly_once:
            settings.append("exactly.once.source.support=enabled")
        if self.commit_interval_ms is not None:
            settings.append(f"ferry.commit.interval.ms={self.commit_interval_ms}")
        return settings + list(self.extra)


def parse_runs(text: str, extra: tuple[str, ...] = ()) -> list[RunSpec]:
    """`ferry-eos,mm2-eos,ferry-eos:50` -> run specs; a commit interval only on ferry runs,
    and `extra` config lines on every ferry run."""
    specs = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        kind, _, interval = part.partition(":")
        if kind not in KINDS:
            raise ValueError(f"{part!r}: runs are {', '.join(KINDS)} (ferry ones with :MS)")
        if interval and not kind.startswith("ferry"):
            raise ValueError(f"{part!r}: only ferry runs take a commit interval")
        if interval and (not interval.isdigit() or int(interval) <= 0):
            raise ValueError(f"{part!r}: the commit interval is a positive number of ms")
        lines = extra if kind.startswith("ferry") else ()
        specs.append(RunSpec(kind, int(interval) if interval else None, lines))
    if not specs:
        raise ValueError("no runs")
    return specs


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--runs", default="ferry-eos,mm2-eos", help="comma-separated, in order (see above)")
    add("--rate", type=float, default=5000.0, help="records/s")
    add("--seconds", type=float, default=60.0, help="timed seconds per run")
    add("--warmup", type=float, default=15.0, help="seconds of the same traffic before (untimed)")
    add(
        "--warm-transactions",
        type=float,
        default=TRANSACTION_WARM_UP_SECONDS,
        help="seconds of transactions on each fresh cluster before the first run, no replicator "
        "taking part (0: none)",
    )
    add("--partitions", type=int, default=8)
    add("--value-bytes", type=int, default=1024)
    add("--results", type=Path, default=RESULTS)
    add("--name", default=NAME, help="results file name")
    add("--merge", action="store_true", help="keep the runs already in <name>.json")
    add("--render", action="store_true", help="only write <name>.md and .png from <name>.json")
    add("--keep-temp", action="store_true", help="keep configs and logs of every run")
    add(
        "--ferry-setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a line of ferry's config for every ferry run (repeatable), e.g. "
        "B.producer.retry.backoff.ms=10",
    )
    args = parser.parse_args()
    try:
        args.runs = parse_runs(args.runs, tuple(args.ferry_setting))
    except ValueError as exc:
        parser.error(f"--runs: {exc}")
    return args


# --- MirrorMaker 2 with exactly-once ----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MirrorMaker2ExactlyOnce(MirrorMaker2):
    """MirrorMaker 2 as bench.replicators starts it, with exactly-once engaged."""

    name = "mm2"

    def __init__(self, bootstraps: tuple[str, str], tasks: int) -> None:
        super().__init__(bootstraps, tasks)
        self.run_id = ""

    def start(self, run_dir: Path, topic: str, *, once: bool = False) -> MeasuredProcess:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = uuid.uuid4().hex[:12]
        self._run_ids[topic] = self.run_id
        settings = java_tools.mm2_properties(self.bootstraps, topic, self.tasks, self.run_id)
        settings.update(java_tools.mm2_exactly_once_settings(free_port()))
        properties = java_tools.write_properties(run_dir / "mm2.properties", settings)
        log_config = java_tools.write_log_config(run_dir, "mm2")
        return MeasuredProcess(java_tools.mm2_command(properties, log_config), run_dir / "mm2")


def make_replicator(spec: RunSpec, bootstraps: tuple[str, str], tasks: int) -> Any:
    if spec.kind == "mm2-eos":
        return MirrorMaker2ExactlyOnce(bootstraps, tasks)
    if spec.kind == "mm2-alos":
        return MirrorMaker2(bootstraps, tasks)
    return Ferry(bootstraps, spec.ferry_settings())


TRANSACTION_LOG, OFFSETS_LOG = "__transaction_state", "__consumer_offsets"


def coordinator_log_ends(bootstrap: str) -> dict[str, int]:
    """Records in the coordinators' logs so far (all partitions), by log; a log not created
    yet counts 0."""
    ends: dict[str, int] = {}
    for log in (TRANSACTION_LOG, OFFSETS_LOG):
        try:
            ends[log] = sum(end_offsets(bootstrap, log).values())
        except Exception:
            ends[log] = 0
    return ends


def writer_prefix(replicator: Any, topic: str) -> str:
    """The start of every transactional id this run's replicator writes with."""
    if isinstance(replicator, MirrorMaker2):
        # Connect's task producers: <group.id>-<connector>-<task>, group.id = mm2-<run id>.
        return f"mm2-{replicator._run_ids.get(topic, '?')}-"
    return "ferry:A->B:task/"  # per copy-task slot, whatever the topic


def list_transactions(bootstrap: str, run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    """Every transactional id the cluster lists (parsed) and the tool's raw output."""
    log = java_tools.write_log_config(run_dir, "transactions")
    done = subprocess.run(
        java_tools.transactions_list_command(bootstrap, log),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    raw = done.stdout + (f"\n[stderr]\n{done.stderr[-2000:]}" if done.returncode else "")
    try:
        rows = java_tools.parse_transactions_list(done.stdout)
    except ValueError:
        return [], raw
    return [row.__dict__ for row in rows], raw


# --- one run ----------------------------------------------------------------------------------


def measure(
    spec: RunSpec,
    index: int,
    bootstraps: tuple[str, str],
    values: list[bytes],
    args: argparse.Namespace,
    work: Path,
    counter: TopicCounter,
) -> dict[str, Any]:
    bootstrap_a, bootstrap_b = bootstraps
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    replicator = make_replicator(spec, bootstraps, args.partitions)
    topic = f"eoc-{index}-{uuid.uuid4().hex[:12]}"
    target = replicator.target(topic)
    create_topic(bootstrap_a, topic, args.partitions)
    # The copies get the target broker's append time as their timestamp (see bench.latency).
    create_topic(bootstrap_b, target, args.partitions, {"message.timestamp.type": "LogAppendTime"})
    run_dir = work / f"{index}-{spec.kind}"
    reader = CommittedReader(bootstrap_b, target).start()
    producer = PacedProducer(bootstrap_a, topic, args.partitions, values)
    proc = replicator.start(run_dir, topic, once=False)
    try:
        warm = 10 * args.partitions
        producer.burst(WARM_UP_KEY, warm)
        # Up and copying in its steady state (ferry: Spark's tasks), as the consumer sees it.
        while reader.received < warm or not replicator.steady(run_dir):
            proc.sample()
            if proc.poll() is not None:
                raise RuntimeError(f"{spec.label} exited:\n{proc.stderr_tail()}")
            if time.monotonic() - proc.began > READY_SECONDS:
                raise TimeoutError(
                    f"{spec.label}: the consumer received {reader.received} of {warm} "
                    f"warm-up records in {READY_SECONDS:.0f} s"
                )
            time.sleep(0.1)
        ready = time.monotonic() - proc.began
        note(f"{spec.label}: ready after {ready:.1f} s; warm-up {args.warmup:.0f} s")
        stop = sample_in_background(proc)
        try:
            warm += producer.paced(WARM_UP_KEY, args.rate, args.warmup)
        finally:
            stop()
        proc.sample(force=True)
        cpu_before = proc.cpu_seconds
        # Offsets beyond the records are the transactions' markers: counted over the timed
        # window (give or take the records in flight as it begins).
        offsets_before, received_before = (
            sum(end_offsets(bootstrap_b, target).values()),
            reader.received,
        )
        # The coordinators' own logs: a transaction's state changes are records in
        # __transaction_state, its offset commits (and their markers) in __consumer_offsets.
        coordinator_before = coordinator_log_ends(bootstrap_b)
        began = time.monotonic()
        note(f"{spec.label}: timed, {args.rate:,.0f} records/s for {args.seconds:.0f} s")
        stop = sample_in_background(proc)
        try:
            timed = producer.paced(TIMED_KEY, args.rate, args.seconds)
        finally:
            stop()
        proc.sample(force=True)
        timed_seconds = time.monotonic() - began
        cpu = proc.cpu_seconds - cpu_before
        wait_for_count(counter, target, warm + timed, 300, spec.label)
        reader.wait_for(timed, 300)
        offsets = sum(end_offsets(bootstrap_b, target).values())
        markers = max(0, (offsets - offsets_before) - (reader.received - received_before))
        coordinator = {
            log: end - coordinator_before.get(log, 0)
            for log, end in coordinator_log_ends(bootstrap_b).items()
        }
        listed, raw = list_transactions(bootstrap_b, run_dir)
        proc.stop(grace=60)
        consumer_latencies = reader.stop()
        append_latencies = read_latencies(bootstrap_b, target, timed)
    except BaseException:
        proc.kill()
        raise
    finally:
        reader.close()
        prefix = writer_prefix(replicator, topic)
        replicator.cleanup(topic)
        cleanup_topics(bootstrap_a, [topic])
    mine = [t for t in listed if str(t["transactional_id"]).startswith(prefix)]
    return {
        "kind": spec.kind,
        "label": spec.label,
        "started": started,
        "exactly_once": spec.exactly_once,
        "commit_interval_ms": spec.interval_ms if spec.kind.startswith("ferry") else None,
        "ferry_settings": list(spec.extra),
        "rate": args.rate,
        "seconds": round(timed_seconds, 2),
        "records": timed,
        "append": latency_summary(append_latencies),
        "consumer": latency_summary(consumer_latencies),
        "cpu_seconds": round(cpu, 2),
        "cpu_share": round(cpu / timed_seconds, 3),
        "peak_rss_mb": round(proc.sampler.peak_rss_bytes / MB, 1),
        "ready_seconds": round(ready, 2),
        "load_before": round(proc.load_before, 2),
        "transaction_markers": markers,
        "markers_per_second": round(markers / timed_seconds, 1),
        "transaction_log_per_second": round(coordinator.get(TRANSACTION_LOG, 0) / timed_seconds, 1),
        "offsets_log_per_second": round(coordinator.get(OFFSETS_LOG, 0) / timed_seconds, 1),
        "transactional_id_prefix": prefix,
        "transactional_ids": mine,
        "transactions_listed": len(listed),
        "transactions_raw": raw if not mine else "",
    }


# --- report -----------------------------------------------------------------------------------


METHOD = {
    "append": (
        "target topic created with message.timestamp.type=LogAppendTime; latency = the copy's "
        "timestamp (the target broker's append time, before any transaction commits) minus "
        "the source timestamp, which the producer also writes into each value"
    ),
    "consumer": (
        "a read_committed consumer of the target topic (confluent-kafka, "
        f"fetch.wait.max.ms={CONSUMER_SETTINGS['fetch.wait.max.ms']}) assigned from the start "
        "and reading throughout the run in the benchmark's process; latency = its receive "
        "time (wall clock right after consume returned the record) minus the source "
        "timestamp in the value; same machine, same clock. At-least-once runs write no "
        "transactions, so there read_committed reads exactly what read_uncommitted does"
    ),
    "cpu": (
        "utime + stime of the replicator's whole process tree from /proc (sampled every "
        "0.25 s) during the timed window, per wall second of it; the brokers, the producer "
        "and the consumer are not included"
    ),
    "transactions": (
        "kafka-transactions.sh list (org.apache.kafka.tools.TransactionsCommand) on the "
        "target while the replicator ran, filtered to this run's writers; transaction "
        "markers = how far the target topic's end offsets moved in the timed window minus the "
        "records a consumer read meanwhile (give or take those in flight as it began)"
    ),
}


def report(
    args: argparse.Namespace, runs: list[dict[str, Any]], errors: list[dict[str, str]]
) -> dict[str, Any]:
    import confluent_kafka

    return {
        "benchmark": "exactly-once latency at a read_committed consumer",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "kafka_version": java_tools.KAFKA_VERSION,
        "librdkafka": confluent_kafka.libversion()[0],
        "cpu_count": os.cpu_count(),
        "rate": args.rate,
        "seconds": args.seconds,
        "warmup_seconds": args.warmup,
        "warm_transactions_seconds": args.warm_transactions,
        "partitions": args.partitions,
        "value_bytes": args.value_bytes,
        "consumer_settings": dict(CONSUMER_SETTINGS),
        "mm2_exactly_once_settings": {
            k: v for k, v in java_tools.mm2_exactly_once_settings(0).items() if k != "listeners"
        }
        | {"listeners": "http://127.0.0.1:<a free port>"},
        "method": METHOD,
        "runs": runs,
        "errors": errors,
    }


def _ms(value: float) -> str:
    return f"{value:,.0f}"


def _warmed(r: dict[str, Any]) -> str:
    seconds = r.get("warm_transactions_seconds", 0)
    if not seconds:
        return ""
    return (
        f"Both clusters' transaction paths exercised for {seconds:.0f} s before the first run "
        "(transactions with no replicator). "
    )


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"# Exactly-once latency at a read_committed consumer: {r['rate']:,.0f} records/s x "
        f"{r['value_bytes']} B, {r['partitions']} partitions",
        "",
        f"{r['date']}; {r['cpu_count']} CPUs; Kafka {r['kafka_version']} (brokers, MM2); "
        f"librdkafka {r['librdkafka']}. Two single-broker clusters, the replicator, the "
        f"producer and the consumer on one machine. {_warmed(r)}Per run "
        f"{r['warmup_seconds']:.0f} s of warm-up, then {r['seconds']:.0f} s timed; one run "
        "each, in the order listed (`python -m bench.exactly_once_consumer`).",
        "",
        "| run | started | append p50 | p99 | p99.9 | consumer p50 | p99 | p99.9 | max "
        "| CPU share | txn ids | markers/s | txn log/s | offsets log/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in r["runs"]:
        a, c = x["append"], x["consumer"]
        ids = len(x["transactional_ids"])
        lines.append(
            f"| {x['label']} | {x.get('started', '')[11:16]} "
            f"| {_ms(a['p50_ms'])} | {_ms(a['p99_ms'])} | {_ms(a['p999_ms'])} "
            f"| {_ms(c['p50_ms'])} | **{_ms(c['p99_ms'])}** | {_ms(c['p999_ms'])} "
            f"| {_ms(c['max_ms'])} | {x['cpu_share']:.2f} | {ids} "
            f"| {x['markers_per_second']:,.0f} "
            f"| {x.get('transaction_log_per_second', '–')} "
            f"| {x.get('offsets_log_per_second', '–')} |"
        )
    lines += [
        "",
        "Latencies in ms; started: when the run began (UTC; each session of the benchmark starts "
        "fresh clusters). append: the target broker's append time minus the source timestamp "
        "(before any transaction commits). consumer: a read_committed consumer's receive time "
        "minus the source timestamp (at-least-once writes no transactions, so there it reads what"
        " read_uncommitted would). CPU share: the replicator's process tree, CPU seconds per "
        "second of the timed window (1.00 = one core). txn ids: transactional ids the target's "
        "coordinators list for this run's writers (`kafka-transactions.sh list`); markers/s: "
        "transaction markers written into the target topic per second of the timed window; txn "
        "log/s and offsets log/s: records the target's coordinators appended to "
        "`__transaction_state` (each transaction's state changes) and `__consumer_offsets` (its "
        "offset commits and their markers) per second of the timed window, every writer of the "
        "cluster counted: the coordinators' load.",
        "",
        "MirrorMaker 2's exactly-once settings (added to its usual benchmark config): "
        + ", ".join(f"`{k} = {v}`" for k, v in r["mm2_exactly_once_settings"].items())
        + ".",
        "",
        "Transactional ids seen:",
        "",
    ]
    for x in r["runs"]:
        ids = x["transactional_ids"]
        if not ids:
            lines.append(f"- {x['label']}: none")
            continue
        states = sorted({t["state"] for t in ids})
        shown = ", ".join(f"`{t['transactional_id']}`" for t in ids[:4])
        more = f" and {len(ids) - 4} more" if len(ids) > 4 else ""
        lines.append(f"- {x['label']}: {len(ids)} ({', '.join(states)}): {shown}{more}")
    for e in r.get("errors", []):
        lines += ["", f"**{e['run']} failed**: {e['error'].splitlines()[0] if e['error'] else ''}"]
    return "\n".join(lines) + "\n"


def chart(r: dict[str, Any], path: Path) -> Path:
    """Latency percentiles per run (append and consumer), and CPU share, as bars."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogFormatter

    runs = r["runs"]
    figure = Figure(figsize=(10, 8), layout="constrained")
    latency, cpu = figure.subplots(2, 1, height_ratios=(3, 1), sharex=True)
    fields = (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9"))
    width = 0.13
    positions = list(range(len(runs)))
    colours = ("tab:blue", "tab:orange", "tab:red")
    for k, (field, label) in enumerate(fields):
        for view, hatch, offset in (("append", "//", 0), ("consumer", "", 3)):
            xs = [p + (k + offset - 2.5) * width for p in positions]
            ys = [x[view][field] for x in runs]
            latency.bar(
                xs,
                ys,
                width,
                color=colours[k],
                alpha=0.45 if view == "append" else 0.9,
                hatch=hatch,
                label=f"{label} at {'the append' if view == 'append' else 'the consumer'}",
            )
    latency.set_yscale("log")
    latency.yaxis.set_major_formatter(LogFormatter())  # 10, 100, not 10^1, 10^2
    latency.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    latency.set_ylabel("latency, ms (log scale)")
    latency.set_title(
        f"{r['rate']:,.0f} records/s x {r['value_bytes']} B, {r['partitions']} partitions, "
        f"{r['seconds']:.0f} s timed: target append and read_committed consumer"
    )
    latency.grid(True, axis="y", which="both", alpha=0.3)
    latency.legend(fontsize="small", ncols=2)
    cpu.bar(positions, [x["cpu_share"] for x in runs], 0.5, color="tab:grey")
    cpu.set_ylabel("CPU share\n(1.0 = one core)")
    cpu.set_ylim(bottom=0)
    cpu.grid(True, axis="y", alpha=0.3)
    cpu.set_xticks(positions)
    cpu.set_xticklabels(
        [f"{x['label'].replace(', ', chr(10))}\n{x.get('started', '')[11:16]}" for x in runs],
        fontsize="small",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path


def write(out: Path, name: str, result: dict[str, Any]) -> str:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (out / f"{name}.md").write_text(table)
    chart(result, out / f"{name}.png")
    return table


# --- main -------------------------------------------------------------------------------------


def main() -> int:
    args = parse_args()
    existing = args.results / f"{args.name}.json"
    if args.render:
        print(write(args.results, args.name, json.loads(existing.read_text())))
        return 0
    earlier = json.loads(existing.read_text())["runs"] if args.merge and existing.exists() else []
    compile_ferry()
    java_tools.classpath()
    work = Path(tempfile.mkdtemp(prefix="ferry-bench-eoc-"))
    runs: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    try:
        note("starting two local clusters")
        with local_clusters(work / "clusters") as bootstraps:
            warm_up(bootstraps[0])
            warm_up(bootstraps[1])
            if args.warm_transactions > 0:
                seconds = args.warm_transactions
                note(f"exercising both clusters' transaction paths for {seconds:.0f} s")
                with ThreadPoolExecutor(max_workers=2) as pool:
                    read = list(
                        pool.map(
                            lambda b: warm_transaction_paths(b, args.warm_transactions),
                            bootstraps,
                        )
                    )
                note(f"warm: {read[0]:,} and {read[1]:,} transactional records read")
            values = make_values(args.value_bytes)
            counter = TopicCounter(bootstraps[1])
            try:
                for index, spec in enumerate(args.runs, start=1):
                    try:
                        run = measure(spec, index, bootstraps, values, args, work, counter)
                    except Exception as exc:  # the other runs still run; said in the results
                        note(f"{spec.label} failed: {exc}")
                        errors.append({"run": spec.label, "error": str(exc)[-3000:]})
                        write(args.results, args.name, report(args, earlier + runs, errors))
                        continue
                    c, a = run["consumer"], run["append"]
                    note(
                        f"{spec.label}: consumer p50 {c['p50_ms']:.0f} p99 {c['p99_ms']:.0f} "
                        f"p99.9 {c['p999_ms']:.0f} ms; append p99 {a['p99_ms']:.0f} ms; CPU "
                        f"{run['cpu_share']:.2f}; {len(run['transactional_ids'])} txn ids"
                    )
                    runs.append(run)
                    # After each run: a later run's failure keeps the earlier ones.
                    write(args.results, args.name, report(args, earlier + runs, errors))
            finally:
                counter.close()
    finally:
        if args.keep_temp:
            note(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(write(args.results, args.name, report(args, earlier + runs, errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
