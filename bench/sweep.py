"""Steady-rate sweep: each replicator's latency and CPU at several fixed rates, side by side.

Each replicator (ferry, then MirrorMaker 2) is started once and runs continuously (`ferry run`
without `--once`; MM2 in dedicated mode, tasks.max = partitions) while it copies one fresh
source topic (N partitions) into its own target topic, created beforehand with
`message.timestamp.type=LogAppendTime` (see bench.latency). A producer on the source
(bench.latency.PacedProducer: values of the benchmark's size, 1 KiB by default, random, each
carrying its source timestamp) first writes `settle` seconds at the lowest rate, not counted
(a JVM's first minute is JIT compilation and, for MM2, its other connectors starting: without
this the first rate would measure start-up, not a steady rate), then goes through the rates in
ascending order; at each rate:

1. warm-up: `warmup` seconds at the rate, keys `w...`, never counted: the replicator's batching
   and polling settle at the new rate before anything is timed;
2. timed: `seconds` at the rate, keys `t...`. CPU share = CPU seconds of the replicator's whole
   process tree in this window (bench.harness.MeasuredProcess: ferry's Python, the Spark JVM
   and Spark's Python workers; MM2's JVM; sampled every 0.25 s) divided by the window's wall
   seconds (1.0 = one core busy);
3. drain: until the target holds every record produced so far. `caught_up_seconds` is how long
   that took after the timed window ended: a replicator that keeps up with the rate needs about
   its own latency, one that does not needs its backlog's worth;
4. read back: the target from where it ended before step 1 (its end offsets then) to its end;
   latency of every timed record = target append time minus source timestamp; p50, p90, p99,
   p99.9 and max.

Why one topic with a warm-up per rate, not a fresh topic per rate: both replicators are set up
with exactly one topic name (as everywhere in these benchmarks: a pattern would find new topics
only at its refresh interval, ten minutes for MM2 by default, and pick up other runs' topics),
so a fresh topic per rate would mean restarting the replicator for every rate, and start-up
(JVM, Spark, rebalances) would be measured instead of steady copying. With one topic the
replicator stays up and warm; the drain in step 3 means no rate inherits a backlog from the
rate before; the warm-up means no rate is timed while the replicator adapts to it; reading back
from the offsets of step 1 means each rate's figures hold only its own timed records.

Caveats: brokers, replicator and this producer share one machine. At high rates the producer
itself needs a good share of a core, so `sent_per_second` records the rate actually produced in
the timed window (the producer paces in 10 ms steps and catches up when it falls behind). A
replicator that cannot keep up with a rate has the backlog in its latencies (and a large
`caught_up_seconds`); the sweep still goes on to the next rate once the target caught up. A
replicator that exits, or does not catch up within `timeout`, ends its own sweep: the rates it
finished are kept and the error is recorded under `errors`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.harness import (
    MeasuredProcess,
    TopicCounter,
    cleanup_topics,
    create_topic,
    sample_in_background,
)
from bench.latency import (
    TIMED_KEY,
    WARM_UP_KEY,
    PacedProducer,
    end_offsets,
    read_latencies,
)
from bench.stats import cpu_share, latency_summary, ratio

DEFAULT_RATES = (1_000.0, 5_000.0, 20_000.0, 50_000.0)
READY_TIMEOUT = 600.0  # start until the first records are copied (JVM, Spark, rebalance)
LABELS = {"ferry": "ferry", "mm2": "MirrorMaker 2"}


class Replicator(Protocol):
    """What bench.replicators' Ferry and MirrorMaker2 have in common."""

    name: str

    def target(self, topic: str) -> str: ...

    def start(self, run_dir: Path, topic: str, *, once: bool) -> MeasuredProcess: ...

    def cleanup(self, topic: str) -> None: ...

    def steady(self, run_dir: Path) -> bool: ...


@dataclass
class SweepSettings:
    rates: list[float]
    seconds: float  # timed, per rate
    warmup: float  # not timed, per rate, before the timed part
    settle: float  # not timed, once after start-up, at the lowest rate, before the first rate
    partitions: int
    value_bytes: int
    timeout: float  # longest wait for the target to catch up after a rate


@dataclass
class Target:
    """The replicator's target topic, and how to count what it holds."""

    bootstrap: str
    topic: str
    counter: TopicCounter

    def count(self) -> int:
        return self.counter.count(self.topic)


@dataclass
class SweepStep:
    replicator: str
    rate: float  # asked for, records/s
    seconds: float  # wall seconds of the timed window
    records: int  # timed records produced (and read back)
    sent_per_second: float  # timed records per wall second of the window
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    cpu_seconds: float  # of the replicator's process tree in the timed window
    cpu_share: float  # cpu_seconds per wall second of the window (1.0 = one core)
    caught_up_seconds: float  # end of the timed window until the target held everything
    load_before: float  # the machine's 1-minute load average as the rate began


# --- pure helpers -----------------------------------------------------------------------------


def parse_rates(text: str) -> list[float]:
    """`1000,5000,20000` -> [1000.0, 5000.0, 20000.0], ascending, without repeats."""
    rates = {float(part) for part in text.split(",") if part.strip()}
    if not rates:
        raise ValueError("no rates")
    if min(rates) <= 0:
        raise ValueError(f"rates must be positive: {text}")
    return sorted(rates)


def ferry_vs_mm2(runs: Iterable[Mapping[str, Any]]) -> list[dict[str, float | None]]:
    """Per rate both replicators finished: ferry's p99 and CPU share divided by MM2's."""
    by_rate: dict[float, dict[str, Mapping[str, Any]]] = {}
    for run in runs:
        by_rate.setdefault(float(run["rate"]), {})[str(run["replicator"])] = run
    rows = []
    for rate, pair in sorted(by_rate.items()):
        ferry, mm2 = pair.get("ferry"), pair.get("mm2")
        if ferry is None or mm2 is None:
            continue
        p99 = ratio(ferry["p99_ms"], mm2["p99_ms"])
        cpu = ratio(ferry["cpu_share"], mm2["cpu_share"])
        rows.append(
            {
                "rate": rate,
                "p99_ratio": None if p99 is None else round(p99, 3),
                "cpu_share_ratio": None if cpu is None else round(cpu, 3),
            }
        )
    return rows


def by_rate(runs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Runs by rate, then ferry before MM2 (before anything else)."""
    order = {"ferry": 0, "mm2": 1}
    return sorted(runs, key=lambda r: (r["rate"], order.get(r["replicator"], 2), r["replicator"]))


def readback_timeout(records: int) -> float:
    """Seconds allowed to read a rate's records back: 2 minutes plus 1 s per 5,000."""
    return 120.0 + records / 5_000


def _num(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(value)


def markdown_lines(sweep: Mapping[str, Any]) -> list[str]:
    """The sweep's section of latest.md: one row per rate and replicator, then the ratios."""
    s = sweep["settings"]
    lines = [
        "",
        "## Steady-rate sweep",
        "",
        f"Each replicator started once and kept running on one topic ({s['partitions']} "
        f"partitions, {s['value_bytes']:,} B values); {_settle(s)}per rate, lowest first: "
        f"{s['warmup']:.0f} s of warm-up (not counted), {s['seconds']:.0f} s timed, then "
        "until the target caught up. Latency: target append time minus source timestamp of "
        "the timed records. CPU share: CPU seconds of the replicator's process tree in the "
        "timed window per wall second (1.00 = one core).",
        "",
        "| rate (records/s) | replicator | p50 ms | p99 ms | p99.9 ms | max ms | CPU share |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for run in by_rate(sweep["runs"]):
        lines.append(
            f"| {run['rate']:,.0f} | {LABELS.get(run['replicator'], run['replicator'])} "
            f"| {run['p50_ms']:,.0f} | {run['p99_ms']:,.0f} | {run['p999_ms']:,.0f} "
            f"| {run['max_ms']:,.0f} | {run['cpu_share']:.2f} |"
        )
    if sweep["ratios"]:
        lines += [
            "",
            "ferry's figure divided by MM2's at the same rate (below 1: ferry's is lower).",
            "",
            "| rate (records/s) | ferry / MM2 p99 | ferry / MM2 CPU share |",
            "|---:|---:|---:|",
        ]
        for row in sweep["ratios"]:
            lines.append(
                f"| {row['rate']:,.0f} | {_num(row['p99_ratio'], '{:.2f} x')} "
                f"| {_num(row['cpu_share_ratio'], '{:.2f} x')} |"
            )
    gaps = sweep.get("ferry_lease_gaps")
    if gaps:
        lines += [
            "",
            f"ferry handed over between leases {gaps['count']} time(s) during its sweep; the "
            f"longest pause between one lease's end and the next one's start was "
            f"{gaps['max_ms']:,.0f} ms.",
        ]
    lines += _caveat_lines(sweep)
    return lines


def _settle(settings: Mapping[str, Any]) -> str:
    settle = settings.get("settle") or 0
    return (
        f"after start-up {settle:.0f} s at the lowest rate (not counted), then " if settle else ""
    )


def _caveat_lines(sweep: Mapping[str, Any]) -> list[str]:
    notes = []
    for run in sweep["runs"]:
        who = f"{LABELS.get(run['replicator'], run['replicator'])} at {run['rate']:,.0f}/s"
        if run["sent_per_second"] < 0.95 * run["rate"]:
            notes.append(
                f"- {who}: the producer reached only {run['sent_per_second']:,.0f} records/s."
            )
        if run["caught_up_seconds"] > 5:
            notes.append(
                f"- {who}: did not keep up; the target caught up "
                f"{run['caught_up_seconds']:,.0f} s after the timed window."
            )
    for name, error in sorted(sweep.get("errors", {}).items()):
        first_line = (error.strip().splitlines() or ["?"])[0]
        notes.append(f"- {LABELS.get(name, name)}: sweep ended early: {first_line}")
    return ["", *notes] if notes else []


# --- measuring --------------------------------------------------------------------------------


def run_sweep(
    replicators: list[Replicator],
    bootstraps: tuple[str, str],
    values: list[bytes],
    settings: SweepSettings,
    work: Path,
    counter: TopicCounter,
    note: Callable[[str], None],
) -> dict[str, Any]:
    """Every rate for each replicator in turn; the result JSON's `sweep`."""
    steps: list[SweepStep] = []
    errors: dict[str, str] = {}
    for replicator in replicators:
        try:
            sweep_replicator(replicator, bootstraps, values, settings, work, counter, note, steps)
        except Exception as exc:
            errors[replicator.name] = f"{type(exc).__name__}: {exc}"[:3000]
            note(f"sweep: {replicator.name} stopped: {errors[replicator.name][:300]}")
    runs = [asdict(step) for step in steps]
    return {
        "settings": asdict(settings),
        "runs": runs,
        "ratios": ferry_vs_mm2(runs),
        "errors": errors,
        "ferry_lease_gaps": lease_gaps(work / "sweep-ferry" / "state" / "A-to-B" / "stats.json"),
    }


def lease_gaps(stats_file: Path) -> dict[str, Any] | None:
    """ferry's handovers between leases during its sweep (from its own statistics): how many,
    and the longest pause between one lease's last task ending and the next one's first
    task starting. None when ferry did not run or ran no second lease."""
    try:
        stats = json.loads(stats_file.read_text())
    except (OSError, ValueError):
        return None
    if not stats.get("lease_gaps"):
        return None
    return {
        "count": int(stats["lease_gaps"]),
        "max_ms": round(float(stats.get("lease_gap_max_seconds", 0.0)) * 1000, 1),
        "last_ms": round(float(stats.get("lease_gap_seconds", 0.0)) * 1000, 1),
    }


def sweep_replicator(
    replicator: Replicator,
    bootstraps: tuple[str, str],
    values: list[bytes],
    settings: SweepSettings,
    work: Path,
    counter: TopicCounter,
    note: Callable[[str], None],
    steps: list[SweepStep],
) -> None:
    """Start `replicator` once, go through every rate (appending to `steps`), stop it."""
    bootstrap_a, bootstrap_b = bootstraps
    topic = f"sweep-{uuid.uuid4()}"
    target = replicator.target(topic)
    create_topic(bootstrap_a, topic, settings.partitions)
    create_topic(
        bootstrap_b, target, settings.partitions, {"message.timestamp.type": "LogAppendTime"}
    )
    producer = PacedProducer(bootstrap_a, topic, settings.partitions, values)
    copies = Target(bootstrap_b, target, counter)
    run_dir = work / f"sweep-{replicator.name}"
    proc = replicator.start(run_dir, topic, once=False)
    try:
        ready = wait_until_copying(
            proc, producer, copies, 10 * settings.partitions, lambda: replicator.steady(run_dir)
        )
        note(
            f"sweep: {replicator.name} copying after {ready:.1f} s; settling for "
            f"{settings.settle:.0f} s at {settings.rates[0]:,.0f}/s"
        )
        producer.paced(WARM_UP_KEY, settings.rates[0], settings.settle)
        for rate in settings.rates:
            step = measure_rate(replicator.name, rate, proc, producer, copies, settings)
            note(
                f"sweep: {replicator.name} at {rate:,.0f}/s: p50 {step.p50_ms:,.0f} ms, p99 "
                f"{step.p99_ms:,.0f} ms, p99.9 {step.p999_ms:,.0f} ms, CPU share "
                f"{step.cpu_share:.2f}, caught up {step.caught_up_seconds:.1f} s after"
            )
            steps.append(step)
        proc.stop(grace=60)
    except BaseException:
        proc.kill()
        raise
    finally:
        replicator.cleanup(topic)  # the target topic and the replicator's own
        cleanup_topics(bootstrap_a, [topic])


def wait_until_copying(
    proc: MeasuredProcess,
    producer: PacedProducer,
    target: Target,
    count: int,
    steady: Callable[[], bool] = lambda: True,
) -> float:
    """Produce `count` warm-up records and wait until the target holds them and the
    replicator is `steady` (ferry: Spark's tasks copy, its head start over). Seconds since
    the replicator started."""
    producer.burst(WARM_UP_KEY, count)
    while target.count() < count or not steady():
        _check_running(proc)
        if time.monotonic() - proc.began > READY_TIMEOUT:
            raise TimeoutError(f"{proc.log.name} copied nothing in {READY_TIMEOUT:.0f} s")
        proc.sample()
        time.sleep(0.1)
    return time.monotonic() - proc.began


def measure_rate(
    name: str,
    rate: float,
    proc: MeasuredProcess,
    producer: PacedProducer,
    target: Target,
    settings: SweepSettings,
) -> SweepStep:
    """Warm-up, timed window, drain and read-back at one rate (see the module docstring)."""
    load_before = os.getloadavg()[0]
    starts = end_offsets(target.bootstrap, target.topic)
    _with_sampling(proc, lambda: producer.paced(WARM_UP_KEY, rate, settings.warmup))
    proc.sample(force=True)
    cpu_before = proc.cpu_seconds
    began = time.monotonic()
    timed = _with_sampling(proc, lambda: producer.paced(TIMED_KEY, rate, settings.seconds))
    proc.sample(force=True)
    ended = time.monotonic()
    cpu = proc.cpu_seconds - cpu_before
    caught_up = drain(proc, target, producer.produced, settings.timeout) - ended
    latencies = read_latencies(
        target.bootstrap, target.topic, timed, readback_timeout(timed), starts=starts
    )
    summary = latency_summary(latencies)
    window = ended - began
    return SweepStep(
        replicator=name,
        rate=rate,
        seconds=round(window, 2),
        records=int(summary["count"]),
        sent_per_second=round(timed / window, 1),
        p50_ms=summary["p50_ms"],
        p90_ms=summary["p90_ms"],
        p99_ms=summary["p99_ms"],
        p999_ms=summary["p999_ms"],
        max_ms=summary["max_ms"],
        cpu_seconds=round(cpu, 2),
        cpu_share=round(cpu_share(cpu, window), 3),
        caught_up_seconds=round(caught_up, 2),
        load_before=round(load_before, 2),
    )


def _with_sampling(proc: MeasuredProcess, produce: Callable[[], int]) -> int:
    """Run `produce` while a thread samples `proc` (the producer loop keeps this one busy)."""
    stop = sample_in_background(proc)
    try:
        return produce()
    finally:
        stop()


def drain(proc: MeasuredProcess, target: Target, expected: int, timeout: float) -> float:
    """Wait until `target` holds `expected` records; the monotonic time it did."""
    deadline = time.monotonic() + timeout
    while target.count() < expected:
        _check_running(proc)
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{target.topic} holds {target.count():,} of {expected:,} records "
                f"{timeout:.0f} s after the rate ended"
            )
        proc.sample()
        time.sleep(0.05)
    return time.monotonic()


def _check_running(proc: MeasuredProcess) -> None:
    if proc.poll() is not None:
        raise RuntimeError(f"{proc.log.name} exited {proc.returncode}:\n{proc.stderr_tail(1500)}")
