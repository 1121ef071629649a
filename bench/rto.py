"""Recovery time of a lost datacenter: `ferry failover flow A->B` with A stopped.

`python -m bench.rto [--shapes 10x8,300x50,1000x10000] [--records N]` per shape (groups x
partitions): two fresh single-broker clusters (`--heap`, 1 GiB each by default). The
partitions are one topic `orders` up to 100 of them, else topics `orders-000`, ... of 100
partitions each (10,000: 100 topics x 100). Group `app-<g>` consumes topic g mod topics and
has committed, on A, its own offset in every partition of that topic (10x8 and 300x50: every
group on the one topic; 1000x10000: 10 groups per topic, 100 partitions each, 100,000 offsets
in all). A holds max(N, 10 per partition) records. `ferry run --once` (copy, checkpoints); then,
for the shapes of `--switchover-shapes` (default: 10x8), `ferry switchover --flow A->B
--writers-stopped --json` timed with A alive, per step, and B's groups deleted again; then
A's node killed, then `ferry failover flow A->B --json` timed as a command. Checks that
every group has the offsets of each of its partitions on B afterwards and says how many
moved. Then B's groups are deleted and the same failover runs again in this process, timed
phase by phase (`FlowFailover.timings`). MirrorMaker 2 has no failover command: with `--mm2`
(the default) a third cluster C is started, MM2 copies A to C with A alive until its
checkpoints name every group partition, and once A is lost its users' script
(`bench/mm2_failover.py`: RemoteClusterUtils per group, then an admin commit) is timed on C.
Results in bench/results/rto.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from bench import mm2_failover
from bench.harness import create_topic, ferry_command, ferry_env, local_clusters
from ferry.local import clusters as local

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS_PER_TOPIC = 100
# MM2 copying 10,000 partitions and checkpointing 1,000 groups from its start.
MM2_CHECKPOINTS_TIMEOUT = 900.0


def layout(partitions: int) -> list[tuple[str, int]]:
    """The topics (name, partitions) holding `partitions` partitions."""
    if partitions <= PARTITIONS_PER_TOPIC:
        return [("orders", partitions)]
    count = -(-partitions // PARTITIONS_PER_TOPIC)
    return [
        (f"orders-{i:03d}", min(PARTITIONS_PER_TOPIC, partitions - i * PARTITIONS_PER_TOPIC))
        for i in range(count)
    ]


def group_name(g: int) -> str:
    return f"app-{g:05d}"


def _config(directory: Path, a: str, b: str) -> Path:
    path = directory / "ferry.yaml"
    path.write_text(
        "clusters:\n"
        f"  A: {{bootstrap.servers: '{a}'}}\n"
        f"  B: {{bootstrap.servers: '{b}'}}\n"
        "A->B.enabled: true\n"
        "topics: 'orders.*'\n"
        "groups: 'app-.*'\n"
        "replication.factor: 1\n"
        "offset-syncs.topic.replication.factor: 1\n"
        "checkpoints.topic.replication.factor: 1\n"
        "heartbeats.topic.replication.factor: 1\n"
        "emit.heartbeats.enabled: 'false'\n"
        "ferry.head.start.enabled: 'false'\n"
        f"ferry.state.dir: {directory / 'state'}\n"
    )
    return path


def _expected(groups: int, topics: list[tuple[str, int]]) -> dict[str, list[tuple[str, int]]]:
    """Each group's partitions: every partition of topic g mod topics."""
    out = {}
    for g in range(groups):
        topic, count = topics[g % len(topics)]
        out[group_name(g)] = [(topic, p) for p in range(count)]
    return out


def _commit_groups(a: str, expected: dict[str, list[tuple[str, int]]], per_partition: int) -> None:
    """Each group commits through a consumer of its own (a group Kafka lists), 8 at a time."""

    def commit(item: tuple[str, list[tuple[str, int]]]) -> None:
        group, partitions = item
        chosen = random.Random(group)
        consumer = Consumer({"bootstrap.servers": a, "group.id": group})
        offsets = [TopicPartition(t, p, chosen.randint(1, per_partition)) for t, p in partitions]
        deadline = time.monotonic() + 120
        while True:  # a new cluster's group coordinators load their partitions first
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                break
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        consumer.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(commit, expected.items()))


def _groups_with_offsets(b: str, expected: dict[str, list[tuple[str, int]]]) -> tuple[int, int]:
    """(groups with some offset on B, groups with an offset in every one of their partitions
    on B)."""
    admin = AdminClient({"bootstrap.servers": b})
    some = every = 0
    for name, partitions in expected.items():
        answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)])
        found = {
            (tp.topic, tp.partition)
            for tp in answer[name].result(30).topic_partitions or []
            if tp.offset >= 0
        }
        some += bool(found)
        every += all((f"A.{t}", p) in found for t, p in partitions)
    return some, every


def _delete_groups(b: str, groups: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": b})
    for future in admin.delete_consumer_groups(groups, request_timeout=60).values():
        future.result(120)


def _phases(config_path: Path) -> dict[str, Any]:
    """The failover again, in this process, timed phase by phase."""
    from ferry.cli.failover_commands import _lift_protection
    from ferry.cli.offsets_commands import recorded_control
    from ferry.config.loader import load_config
    from ferry.offsets.flow_failover import apply_flow_failover, plan_flow_failover

    cfg = load_config(config_path)
    began = time.monotonic()
    _lift_protection(cfg, "A", "B", None, True)
    lifted = time.monotonic()
    control = recorded_control(cfg, "A", "B")
    read = time.monotonic()
    report = plan_flow_failover(cfg, "A->B", control=control)
    apply_flow_failover(cfg, report)
    total = time.monotonic() - began
    timings = report.timings
    return {
        "total": round(total, 2),
        "lift_protection": round(lifted - began, 2),
        "control_record": round(read - lifted, 2),
        **{k: round(v, 2) for k, v in timings.items()},
        "moved": report.count("moved"),
    }


def _switchover(config: Path, b: str, groups: list[str]) -> dict[str, Any]:
    """`ferry switchover --flow A->B --writers-stopped` timed (A alive, the flow caught up by
    `ferry run --once`); then B's groups are deleted again, for the failover after it."""
    began = time.monotonic()
    done = subprocess.run(
        ferry_command(
            "switchover", "-c", str(config), "--flow", "A->B", "--writers-stopped", "--json"
        ),
        capture_output=True,
        text=True,
        env=ferry_env(),
        check=False,
    )
    seconds = time.monotonic() - began
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    summary = (report.get("groups") or {}).get("summary", {})
    _delete_groups(b, groups)
    return {
        "seconds": round(seconds, 1),
        "exit_code": done.returncode,
        "steps": {s["step"]: round(s["seconds"], 2) for s in report.get("steps", [])},
        "groups_moved": summary.get("moved"),
        "stderr": done.stderr[-2000:] if done.returncode else "",
    }


def _baseline(tree: Path, config: Path, b: str, groups: list[str]) -> dict[str, Any]:
    """The same failover by another checkout of ferry (`tree`, e.g. the commit before a
    change), on the same clusters: B's groups deleted, then that tree's
    `bench.rto._phases` in a process of its own (its phases timed as it can)."""
    env = {**ferry_env(), "PYTHONPATH": f"{tree / 'src'}:{tree}"}
    _delete_groups(b, groups)
    script = (
        "import json, sys; from pathlib import Path; from bench.rto import _phases; "
        "print(json.dumps(_phases(Path(sys.argv[1]))))"
    )
    phased = subprocess.run(
        [sys.executable, "-c", script, str(config)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=tree,
    )
    lines = phased.stdout.strip().splitlines()
    return {
        "tree": str(tree),
        "phases": json.loads(lines[-1]) if lines else {"error": phased.stderr[-2000:]},
    }


def _mm2_checkpoints(
    directory: Path,
    a: str,
    c: str,
    topics: list[tuple[str, int]],
    expected: dict[str, list[tuple[str, int]]],
) -> dict[str, Any]:
    """MM2 copying A to C until its checkpoints name every group partition (A alive); the
    seconds that took, from MM2's start, or why it did not get there (the shape's other
    figures are kept either way). MM2 is stopped after."""
    remote = [(f"A.{t}", n) for t, n in topics]
    mm2 = mm2_failover.start(directory / "mm2", a, c, "orders.*", "app-.*", remote)
    try:
        seconds = mm2_failover.await_checkpoints(c, expected, mm2, timeout=MM2_CHECKPOINTS_TIMEOUT)
        return {"checkpoints_seconds": round(seconds, 1), "error": ""}
    except RuntimeError as exc:
        return {"checkpoints_seconds": None, "error": str(exc)}
    finally:
        mm2.stop()
        refused = mm2_failover.refused_creations(directory / "mm2")
        if refused:
            print(f"MM2: {refused} remote topic creations refused by C", file=sys.stderr)


def run_shape(
    groups: int,
    partitions: int,
    records: int,
    heap: str,
    switchover: bool,
    baseline: Path | None = None,
    mm2: bool = True,
) -> dict[str, Any]:
    topics = layout(partitions)
    records = max(records, 10 * partitions)
    expected = _expected(groups, topics)
    aliases = ("A", "B", "C") if mm2 else ("A", "B")
    with tempfile.TemporaryDirectory(prefix="ferry-bench-rto-") as tmp:
        directory = Path(tmp)
        with local_clusters(directory, heap, aliases) as bootstraps:
            a, b = bootstraps[:2]
            for topic, count in topics:
                create_topic(a, topic, count)
            producer = Producer({"bootstrap.servers": a, "linger.ms": 5})
            for topic, count in topics:
                for i in range(records * count // partitions):
                    producer.produce(topic, value=b"x" * 100, partition=i % count)
                    producer.poll(0)
            producer.flush(120)
            del producer
            began = time.monotonic()
            _commit_groups(a, expected, records // partitions)
            commit_seconds = time.monotonic() - began
            config = _config(directory, a, b)
            began = time.monotonic()
            once = subprocess.run(
                ferry_command("run", "-c", str(config), "--once"),
                capture_output=True,
                text=True,
                env=ferry_env(),
                check=False,
            )
            copy_seconds = time.monotonic() - began
            if once.returncode != 0:
                raise RuntimeError(f"ferry run --once failed:\n{once.stderr[-3000:]}")
            switched = _switchover(config, b, list(expected)) if switchover else None
            readied = _mm2_checkpoints(directory, a, bootstraps[2], topics, expected) if mm2 else {}
            local.kill_node(directory, "A", 1, signal.SIGKILL)  # the datacenter is lost
            began = time.monotonic()
            failover = subprocess.run(
                ferry_command("failover", "flow", "A->B", "-c", str(config), "--json"),
                capture_output=True,
                text=True,
                env=ferry_env(),
                check=False,
            )
            seconds = time.monotonic() - began
            report = json.loads(failover.stdout) if failover.stdout.strip() else {}
            statuses = [g["status"] for g in report.get("groups", [])]
            some, every = _groups_with_offsets(b, expected)
            mirrored: dict[str, Any] | None = None
            if mm2 and readied["error"]:
                mirrored = {**readied, "exit_code": None}
            elif mm2:
                c = bootstraps[2]
                mirrored = mm2_failover.scripted_failover(c, list(expected), directory / "mm2")
                mirrored["checkpoints_seconds"] = readied["checkpoints_seconds"]
                on_c = _groups_with_offsets(c, expected)
                mirrored["groups_with_offsets"], mirrored["groups_with_every_partition"] = on_c
            _delete_groups(b, list(expected))
            phases = _phases(config)
            compared = _baseline(baseline, config, b, list(expected)) if baseline else None
            return {
                "groups": groups,
                "partitions": partitions,
                "topics": len(topics),
                "group_partitions": sum(len(p) for p in expected.values()),
                "records": records,
                "commit_on_a_seconds": round(commit_seconds, 1),
                "copy_seconds": round(copy_seconds, 1),
                "failover_seconds": round(seconds, 1),
                "exit_code": failover.returncode,
                "moved": statuses.count("moved"),
                "other": len(statuses) - statuses.count("moved"),
                "groups_with_offsets_on_b": some,
                "groups_with_every_partition_on_b": every,
                "recovery_point": (report.get("recovery_point") or {}).get("kind"),
                "phases": phases,
                "switchover": switched,
                "mm2": mirrored,
                "baseline": compared,
                "stderr": failover.stderr[-2000:] if failover.returncode else "",
            }


PHASES = (
    ("lift_protection", "lift protection"),
    ("control_record", "control record"),
    ("checkpoints", "read checkpoints"),
    ("source", "decide A is down"),
    ("recovery_point", "recovery point"),
    ("plan", "plan groups (B's state and offsets)"),
    ("commit", "commit on B"),
)


def write(rows: list[dict[str, Any]], note: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rto.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# Recovery time: `ferry failover flow A->B` with A lost",
        "",
        f"{note}. Single-broker clusters on this 2-core machine (shared), 1 GiB of heap each; "
        "A's node killed (SIGKILL) after `ferry run --once` (copy and checkpoints); the "
        "failover timed as a command (`ferry failover flow A->B --json`, process start "
        "included). Group partitions: offsets committed on A, summed over the groups (10 "
        "groups per topic of 100 partitions at 10,000). `python -m bench.rto`.",
        "",
        "| groups | partitions | group partitions | failover (s) | moved | not moved "
        "| groups with offsets on B | of them every partition | exit | recovery point |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['groups']:,} | {r['partitions']:,} | {r['group_partitions']:,} "
        f"| {r['failover_seconds']} | {r['moved']:,} | {r['other']:,} "
        f"| {r['groups_with_offsets_on_b']:,} | {r['groups_with_every_partition_on_b']:,} "
        f"| {r['exit_code']} | {r['recovery_point']} |"
        for r in rows
    ]
    lines += [
        "",
        "## Where the time goes",
        "",
        "The same failover again in the bench's process (B's groups deleted first), seconds "
        "per phase (`FlowFailover.timings`); the command above adds its start (Python, "
        "imports) to these.",
        "",
        "| groups | partitions | " + " | ".join(label for _k, label in PHASES) + " | total |",
        "|---:|---:|" + "---:|" * (len(PHASES) + 1),
    ]
    lines += [
        f"| {r['groups']:,} | {r['partitions']:,} | "
        + " | ".join(str(r["phases"].get(k, "")) for k, _label in PHASES)
        + f" | {r['phases']['total']} |"
        for r in rows
    ]
    compared = [r for r in rows if r.get("baseline")]
    if compared:
        said = []
        for r in compared:
            phases = r["baseline"]["phases"]
            parts = ", ".join(f"{k} {v}" for k, v in phases.items() if k != "total")
            said.append(
                f"{r['groups']:,}x{r['partitions']:,}: total {phases.get('total')} s ({parts})"
            )
        lines += [
            "",
            "The same failover by `--baseline` (another source tree, on the same clusters, B's "
            "groups deleted first), its phases timed by wrapping its functions: "
            + "; ".join(said)
            + ".",
        ]
    switched = [r for r in rows if r.get("switchover")]
    if switched:
        steps = ("fence", "drain", "groups", "reverse")
        lines += [
            "",
            "## Planned: `ferry switchover --flow A->B --writers-stopped`",
            "",
            "A alive, the flow caught up by `ferry run --once`, before A is killed (B's groups "
            "deleted after it, for the failover). Timed as a command; seconds per step as its "
            "report gives them (no fence: the writers were stopped).",
            "",
            "| groups | partitions | switchover (s) | " + " | ".join(steps) + " | groups moved "
            "| exit |",
            "|---:|---:|---:|" + "---:|" * (len(steps) + 2),
        ]
        lines += [
            f"| {r['groups']:,} | {r['partitions']:,} | {r['switchover']['seconds']} | "
            + " | ".join(str(r["switchover"]["steps"].get(s, "")) for s in steps)
            + f" | {r['switchover']['groups_moved']} | {r['switchover']['exit_code']} |"
            for r in switched
        ]
    mirrored = [r for r in rows if r.get("mm2")]
    if mirrored:
        lines += [
            "",
            "## MirrorMaker 2, scripted, in the same run",
            "",
            "MM2 has no failover command; its users script one: for each group "
            "`RemoteClusterUtils.translateOffsets` on the target and an admin commit of what it "
            "returns (`bench/java/Mm2Failover.java`, one group after another). MM2 copied A to "
            "a cluster of its own, C, with A alive, until its checkpoints named every group "
            "partition (checkpoints every second); then, A lost, the script ran on C. Command: "
            "the JVM's start and the script's compile included; loop: the groups alone. MM2's "
            "remote topics were created on C first, one a request: MM2 4.1 asks for all of them "
            "in one CreateTopics request, which a Kafka 4 controller refuses whole at 100 topics "
            "of 100 partitions (`PolicyViolationException: Unable to perform excessively large "
            "batch operation`), and it asks again the same way at every topic refresh, copying "
            "nothing meanwhile (seen here: 7,800 refusals in 6 minutes).",
            "",
            "| groups | partitions | MM2 until checkpointed (s) | script command (s) "
            "| script loop (s) | groups moved | of them every partition | ferry failover (s) "
            "| MM2 / ferry |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in mirrored:
            m = r["mm2"]
            if m.get("error"):
                lines.append(f"| {r['groups']:,} | {r['partitions']:,} | {m['error']} |||||||")
                continue
            ratio = (
                f"{m['command_seconds'] / r['failover_seconds']:.1f}x"
                if m.get("exit_code") == 0 and r["failover_seconds"]
                else "failed"
            )
            lines.append(
                f"| {r['groups']:,} | {r['partitions']:,} | {m['checkpoints_seconds']} "
                f"| {m['command_seconds']} | {m['loop_seconds']} | {m['groups_moved']} "
                f"| {m['groups_with_every_partition']} | {r['failover_seconds']} | {ratio} |"
            )
    (RESULTS / "rto.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="10x8,1000x10000", help="groups x partitions, ...")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--heap", default="1g", help="each broker's heap (ferry local up --heap)")
    parser.add_argument(
        "--switchover-shapes",
        default="10x8",
        help="the shapes whose switchover is timed before A is lost ('' for none)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of ferry (a source tree) whose failover also runs on the "
        "same clusters, for a before/after comparison",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the shapes of the results file that this run does not measure",
    )
    parser.add_argument(
        "--mm2",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="MirrorMaker 2's scripted failover of the same groups, A to a cluster C, timed "
        "in the same run",
    )
    parser.add_argument("--out", type=Path, default=None, help="print only; results untouched")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    if args.merge and (RESULTS / "rto.json").exists():
        kept = json.loads((RESULTS / "rto.json").read_text())
    began = datetime.now(UTC)
    switch = args.switchover_shapes
    for shape in args.shapes.split(","):
        groups, partitions = (int(n) for n in shape.split("x"))
        switchover = shape in switch.split(",")
        row = run_shape(
            groups, partitions, args.records, args.heap, switchover, args.baseline, args.mm2
        )
        print(json.dumps(row), flush=True)
        rows.append(row)
        if args.out is None:  # after every shape: a run stopped later keeps those done
            measured = {(r["groups"], r["partitions"]) for r in rows}
            others = [r for r in kept if (r["groups"], r["partitions"]) not in measured]
            merged = sorted(others + rows, key=lambda r: (r["groups"], r["partitions"]))
            write(merged, f"{began:%Y-%m-%d %H:%M} UTC, `--shapes {args.shapes}`")


if __name__ == "__main__":
    main()
