"""Many partitions: a small backlog over thousands of partitions, ferry against MirrorMaker 2.

Two fresh local clusters per shape (`ferry local up`, 1 GiB of heap each). For each shape
(`--shapes`, topics x partitions: 100 x 10, 1,000 x 10 and 100 x 100 by default) source topics get
`--records` records per topic (one per partition, round-robin); then, one after the other on
the same source topics:

- `ferry run --once` (its defaults: the driver's head start, then Spark's leases) into
  `A.ferry.<topic>`;
- MirrorMaker 2 (`connect-mirror-maker`, `tasks.max` = `--mm2-tasks`) into `A.<topic>`,
  stopped once the target holds every record.

Measured for each: seconds from process start until every target partition holds its records
(the target's ends, read in batches, every 0.5 s), the CPU seconds and peak RSS of the process
tree, and for ferry the peak RSS of its driver (the Python process alone: VmHWM). MM2 is
stopped early when its log shows the target's controller refusing to create its topics (it
asks again only at its next topic refresh, 10 minutes later by default); the note quotes the
line. Then, in this process against the same clusters, ferry's planner for the shape (no
Spark): the metadata refresh (`TopicManager.sync`: both clusters' topics listed, remote topics'
settings described) and the planning of one lease (the source's ends and the flow's positions
on the target, read at once, then the bins), each the median of `--plans` rounds, and of the
planning the part spent reading those offsets.

Writes bench/results/partitions.{json,md} and partitions.png (or under `--out`) after every
shape, so a run stopped later keeps the shapes it finished, and prints the table. With
`--merge`, the shapes run replace the same shapes in the results file already there and keep
the others (every shape in one run takes longer than one sitting on a shared machine:
`--shapes 1000x10,100x100`, then `--shapes 100x10 --merge`). Run from the repository root:
`python -m bench.partitions`.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from bench.engine_once import machine_info
from bench.harness import MeasuredProcess, compile_ferry, local_clusters, warm_up
from bench.replicators import Ferry, MirrorMaker2
from ferry.kafka.admin_batches import MAX_OFFSETS_PARTITIONS_PER_REQUEST, batches, submit

COPY_TIMEOUT = 600.0
POLL_SECONDS = 0.5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="100x10,1000x10,100x100", help="TOPICSxPARTITIONS,...")
    parser.add_argument("--records", type=int, default=3, help="records per topic")
    parser.add_argument("--mm2-tasks", type=int, default=2)
    parser.add_argument("--plans", type=int, default=5, help="planner rounds per shape")
    parser.add_argument("--skip-mm2", action="store_true")
    parser.add_argument(
        "--profile-plan",
        action="store_true",
        help="write one lease's planning under cProfile to <out>/plan-profile-<shape>.txt",
    )
    parser.add_argument(
        "--timeout", type=float, default=COPY_TIMEOUT, help="seconds per copy at most"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other shapes' runs of the results file already in --out",
    )
    return parser.parse_args()


def shape_of(text: str) -> tuple[int, int]:
    topics, _, partitions = text.strip().partition("x")
    return int(topics), int(partitions)


# --- source topics and target counts ----------------------------------------------------------


def make_source(bootstrap: str, names: list[str], partitions: int, records: int) -> int:
    """The topics, created in requests the controller accepts, with `records` each; the
    number of records produced."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    per_request = max(1, 5_000 // partitions)
    for batch in batches(names, per_request):
        for future in admin.create_topics([NewTopic(n, partitions, 1) for n in batch]).values():
            future.result(180)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    pending = {(name, i) for name in names for i in range(records)}
    refused: set[tuple[str, int]] = set()
    other: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            refused.add((msg.topic(), int(msg.value()[1:])))  # the value is b"v<i>"
            if err.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                other.append(err)

    deadline = time.monotonic() + 300
    # The controller answers before the broker leads every new partition: a record for one
    # it does not lead yet is refused (UNKNOWN_TOPIC_OR_PART, or at once by the client while
    # its metadata does not know the topic yet: _UNKNOWN_TOPIC) and produced again.
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} records of the backlog still refused after 300 s")
        refused.clear()
        for name, i in sorted(pending):
            try:
                producer.produce(
                    name, value=b"v%d" % i, partition=i % partitions, on_delivery=on_delivery
                )
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._UNKNOWN_TOPIC:
                    raise
                refused.add((name, i))
            producer.poll(0)
        if producer.flush(300) or other:
            raise RuntimeError(f"the backlog was not delivered: {other[:3]}")
        pending = set(refused)
        if pending:
            time.sleep(0.5)  # the broker is still creating partitions: ask again shortly
    return len(names) * records


def target_records(admin: AdminClient, topics: list[str], partitions: int) -> int:
    """Records the target topics hold now (ends only: they were empty before); a topic not
    there yet counts 0."""
    known = admin.list_topics(timeout=30).topics
    request = [TopicPartition(t, p) for t in topics if t in known for p in range(partitions)]
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]

    def send(batch: list[TopicPartition]) -> dict[Any, Any]:
        return admin.list_offsets(dict.fromkeys(batch, latest), request_timeout=30)

    total = 0
    for future in submit(send, request, MAX_OFFSETS_PARTITIONS_PER_REQUEST).values():
        try:
            total += max(0, future.result(40).offset)
        except Exception:  # a partition just created, no leader yet: counted next time
            continue
    return total


def driver_peak_rss(pid: int) -> int:
    """VmHWM of one process (its own peak resident memory), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# What MM2's log says when the target's controller refuses to create its remote topics: more
# partitions (or metadata records) in one CreateTopics request than the controller takes.
MM2_REFUSED = (
    "Excessively large number",
    "PolicyViolationException",
    "POLICY_VIOLATION",
    "BoundedListTooLongException",
)


def refused_line(log: Path) -> str | None:
    """The first line of `log` saying the controller refused a topic creation, if any."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return next(
        (line.strip() for line in text.splitlines() if any(m in line for m in MM2_REFUSED)), None
    )


def time_until_copied(
    proc: MeasuredProcess,
    count: Callable[[], int],
    expected: int,
    *,
    exits: bool,
    timeout: float = COPY_TIMEOUT,
    refused: Callable[[], str | None] = lambda: None,
) -> dict[str, Any]:
    """Poll the target until it holds `expected` records; the copy's figures. `refused`:
    why the copy will not happen within `timeout` (then RefusedError), or None."""
    driver_peak = 0
    while True:
        proc.sample()
        driver_peak = max(driver_peak, driver_peak_rss(proc.proc.pid))
        held = count()
        now = time.monotonic()
        if held >= expected:
            proc.sample(force=True)
            return {
                "seconds": round(now - proc.began, 2),
                "cpu_seconds": round(proc.cpu_seconds, 1),
                "peak_rss_mb": round(proc.sampler.peak_rss_bytes / 1e6),
                "driver_peak_rss_mb": round(driver_peak / 1e6) if driver_peak else None,
                "records": held,
            }
        code = proc.poll()
        if code is not None and not (exits and code == 0):
            raise RuntimeError(f"{proc.log.name} exited {code}:\n{proc.stderr_tail()}")
        if now - proc.began > timeout:
            raise TimeoutError(f"{proc.log.name}: {held} of {expected} after {timeout:.0f} s")
        reason = refused()
        if reason is not None:
            raise RefusedError(
                f"{proc.log.name}: {held} of {expected} after {now - proc.began:.0f} s, stopped: "
                f"its log says {reason}"
            )
        time.sleep(POLL_SECONDS)


class RefusedError(RuntimeError):
    """The replicator's log says the copy cannot finish in time."""


# --- ferry's planner, in this process ---------------------------------------------------------


def planner_times(
    config_path: Path, rounds: int, profile_to: Path | None = None
) -> dict[str, float]:
    """Median seconds of the metadata refresh and of one lease's planning, no Spark, and of
    the planning the part reading the source's ends and the flow's positions. With
    `profile_to`, one more plan runs under cProfile and its 40 costliest calls (cumulative
    time) are written there."""
    from ferry.config import load_config
    from ferry.engine.flow_spec import FlowSpec
    from ferry.engine.spark.source import Planner

    config = load_config(config_path)
    flow = next(f for f in config.flows if f.enabled)
    planner = Planner(FlowSpec.of(config, flow, leased=True))
    refresh, plan, reads = [], [], []
    read_offsets = planner._read_lease_offsets

    def timed_read(*, write_latest: bool) -> None:
        began = time.perf_counter()
        read_offsets(write_latest=write_latest)
        reads.append(time.perf_counter() - began)

    planner._read_lease_offsets = timed_read  # type: ignore[method-assign]
    start: dict[str, Any] = {"lease": 0, "topics": {}}
    for _ in range(rounds):
        began = time.perf_counter()
        planner._refresh(force=True)
        refresh.append(time.perf_counter() - began)
        began = time.perf_counter()
        end = planner._next_lease(start)
        bins = planner.partitions(start, end)
        plan.append(time.perf_counter() - began)
        assert bins, "the planner planned no bin"
        start = end
    if profile_to is not None:
        profiler = cProfile.Profile()
        profiler.enable()
        planner.partitions(start, planner._next_lease(start))
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        profile_to.write_text(text.getvalue())
    return {
        "metadata_refresh_seconds": round(statistics.median(refresh), 3),
        "plan_seconds_per_lease": round(statistics.median(plan), 3),
        "plan_offsets_read_seconds": round(statistics.median(reads), 3),
    }


# --- the run ----------------------------------------------------------------------------------


def run_shape(
    bootstraps: tuple[str, str], topics: int, partitions: int, args: argparse.Namespace, out: Path
) -> list[dict[str, Any]]:
    prefix = f"p{topics}x{partitions}-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    began = time.monotonic()
    expected = make_source(bootstraps[0], names, partitions, args.records)
    print(f"{topics} x {partitions}: source ready in {time.monotonic() - began:.0f} s", flush=True)
    target = AdminClient({"bootstrap.servers": bootstraps[1]})
    shape = {"topics": topics, "partitions": partitions, "total_partitions": topics * partitions}
    results = []

    ferry = Ferry(bootstraps)
    run_dir = out / f"ferry-{prefix}"
    run_dir.mkdir(parents=True)
    config = ferry.config(run_dir, f"{prefix}.*")
    proc = MeasuredProcess(
        [sys.executable, "-m", "ferry", "run", "-c", str(config), "--once", "--json"],
        run_dir / "ferry",
    )
    remote = [ferry.target(n) for n in names]
    try:
        copied = time_until_copied(
            proc,
            lambda: target_records(target, remote, partitions),
            expected,
            exits=True,
            timeout=args.timeout,
        )
        proc.wait(300)
    finally:
        proc.stop()
    profile = None
    if args.profile_plan:  # kept: `out` is the shape's temporary directory
        args.out.mkdir(parents=True, exist_ok=True)
        profile = args.out / f"plan-profile-{topics}x{partitions}.txt"
    copied.update(planner_times(config, args.plans, profile))
    results.append({"replicator": "ferry", **shape, **copied})
    print(f"  ferry: {copied}", flush=True)

    if not args.skip_mm2:
        mm2 = MirrorMaker2(bootstraps, args.mm2_tasks)
        mm2_dir = out / f"mm2-{prefix}"
        proc = mm2.start(mm2_dir, f"{prefix}.*")
        remote = [mm2.target(n) for n in names]
        try:
            copied = time_until_copied(
                proc,
                lambda: target_records(target, remote, partitions),
                expected,
                exits=False,
                timeout=args.timeout,
                refused=lambda: refused_line(mm2_dir / "mm2.log"),
            )
        except (TimeoutError, RefusedError) as exc:  # recorded: the other shapes still run
            proc.sample(force=True)
            copied = {
                "seconds": None,
                "cpu_seconds": round(proc.cpu_seconds, 1),
                "peak_rss_mb": round(proc.sampler.peak_rss_bytes / 1e6),
                "note": str(exc),
            }
        finally:
            proc.stop()
        results.append({"replicator": "mm2", **shape, **copied})
        print(f"  mm2: {copied}", flush=True)
    return results


def chart(runs: list[dict[str, Any]], path: Path) -> None:
    """Seconds until the backlog is on the target against total partitions, per replicator
    and shape."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.subplots()
    colours = {"ferry": "tab:blue", "mm2": "tab:orange"}
    labels = {"ferry": "ferry run --once", "mm2": "MirrorMaker 2"}
    for name in ("ferry", "mm2"):
        mine = sorted((r for r in runs if r["replicator"] == name), key=lambda r: r["topics"])
        if not mine:
            continue
        mine = [r for r in mine if r["seconds"] is not None]
        xs = [r["total_partitions"] for r in mine]
        ys = [r["seconds"] for r in mine]
        axes.scatter(xs, ys, color=colours[name], label=labels[name], s=40)
        for r in mine:
            axes.annotate(
                f"{r['topics']}x{r['partitions']}",
                (r["total_partitions"], r["seconds"]),
                textcoords="offset points",
                xytext=(5, 5),
                fontsize="small",
            )
    axes.set_xscale("log")
    axes.set_xlabel("partitions (topics x partitions per topic)")
    axes.set_ylabel("seconds from start until the backlog is on the target")
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend()
    axes.set_title("A small backlog over many partitions")
    figure.savefig(path, dpi=100)


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Many partitions: ferry and MirrorMaker 2",
        "",
        f"{report['date']}, {report['machine']['cpu_count']} CPUs, Kafka "
        f"{report['machine']['kafka']}; {report['settings']['records_per_topic']} records per "
        f"topic; MM2 tasks.max = {report['settings']['mm2_tasks']}. Seconds: process start "
        "until the target holds every record. Planning and refresh: ferry's planner in the "
        "bench's process, medians.",
        "",
        "| shape | partitions | replicator | seconds | CPU s | tree peak RSS MB | "
        "driver peak RSS MB | metadata refresh s | planning per lease s | of it, offsets read s |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {r['topics']} x {r['partitions']} | {r['total_partitions']:,} | "
            f"{r['replicator']} | {r['seconds'] or r.get('note', '')} | "
            f"{r.get('cpu_seconds', '')} | {r.get('peak_rss_mb', '')} | "
            f"{r.get('driver_peak_rss_mb') or ''} | {r.get('metadata_refresh_seconds', '')} | "
            f"{r.get('plan_seconds_per_lease', '')} | {r.get('plan_offsets_read_seconds', '')} |"
        )
    invocations = report["invocations"]
    took = "; ".join(
        f"`{i['command']}` ({i['shapes']}), {i['date']}, {i['seconds']:.0f} s" for i in invocations
    )
    lines += ["", f"Chart: [partitions.png](partitions.png). Runs: {took}."]
    return "\n".join(lines) + "\n"


def merged(
    earlier: dict[str, Any],
    runs: list[dict[str, Any]],
    invocation: dict[str, Any],
    settings: dict[str, Any],
    date: str,
    machine: dict[str, Any],
) -> dict[str, Any]:
    """The report: `runs`, and of `earlier` (a report already written; empty: none) the runs
    of other shapes, in the order of their number of partitions then topics."""
    shapes = {(r["topics"], r["partitions"]) for r in runs}
    kept = [r for r in earlier.get("runs", []) if (r["topics"], r["partitions"]) not in shapes]
    ordered = sorted(
        [*kept, *runs], key=lambda r: (r["total_partitions"], r["topics"], r["replicator"])
    )
    return {
        "date": date,
        "machine": machine,
        "settings": settings,
        "runs": ordered,
        "invocations": [*earlier.get("invocations", []), invocation] if kept else [invocation],
    }


def keep_logs(tmp: Path, into: Path) -> Path:
    """The shape's log files (brokers', ferry's, MM2's) copied out of its temporary
    directory, which is deleted when the shape ends."""
    for log in tmp.rglob("*"):
        if not log.is_file() or log.suffix not in (".log", ".out", ".err", ".txt"):
            continue
        if log.stem.isdigit():
            continue  # a partition's segment (00000000000000000000.log), data not a log
        dest = into / log.relative_to(tmp)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, dest)
    return into


def main() -> None:
    args = parse_args()
    shapes = [shape_of(s) for s in args.shapes.split(",") if s.strip()]
    settings = {
        "records_per_topic": args.records,
        "mm2_tasks": args.mm2_tasks,
        "plans": args.plans,
        "timeout_seconds": args.timeout,
    }
    earlier: dict[str, Any] = {}
    results = args.out / "partitions.json"
    if args.merge and results.exists():
        earlier = json.loads(results.read_text())
        if earlier.get("settings", {}).get("records_per_topic") != args.records:
            raise SystemExit(f"--merge: {results} holds runs of other settings")
    compile_ferry()
    machine = machine_info(local=True)
    began = time.monotonic()
    runs: list[dict[str, Any]] = []
    # Fresh clusters per shape: a broker holding every shape's topics (and both copies of
    # them) would hold more partitions' log files than a process may open (ulimit -n).
    for done, (topics, partitions) in enumerate(shapes, 1):
        with (
            tempfile.TemporaryDirectory(prefix="ferry-bench-partitions-") as tmp,
            local_clusters(Path(tmp) / "clusters") as bootstraps,
        ):
            warm_up(bootstraps[0])
            warm_up(bootstraps[1])
            try:
                runs += run_shape(bootstraps, topics, partitions, args, Path(tmp))
            except BaseException:
                kept = keep_logs(Path(tmp), args.out / f"failed-{topics}x{partitions}-logs")
                print(f"{topics} x {partitions} failed; logs kept in {kept}", flush=True)
                raise
        # Written after every shape: a run stopped later keeps the shapes it finished.
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        invocation = {
            "command": "python -m bench.partitions " + " ".join(sys.argv[1:]),
            "shapes": ", ".join(f"{t} x {p}" for t, p in shapes[:done]),
            "date": now,
            "seconds": round(time.monotonic() - began),
        }
        report = merged(earlier, runs, invocation, settings, now, machine)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "partitions.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.out / "partitions.md").write_text(markdown(report))
        chart(report["runs"], args.out / "partitions.png")
    print((args.out / "partitions.md").read_text())


if __name__ == "__main__":
    main()
