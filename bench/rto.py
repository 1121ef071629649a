"""Recovery time of a lost datacenter: `ferry failover --flow A->B` with A stopped.

`python -m bench.rto [--shapes 10x8,300x50] [--records N]` per shape (groups x partitions):
two fresh single-broker clusters, one topic of that many partitions on A holding N records,
every group committed on A at its own offsets in every partition, `ferry run --once`
(copy, checkpoints), A's node killed, then `ferry failover --flow A->B --json` timed. Checks
that every group has its offsets on B afterwards and says how many moved. Results in
bench/results/rto.{json,md}. MirrorMaker 2 has no equivalent command (its users script
RemoteClusterUtils per group), so there is no side-by-side figure here.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.harness import create_topic, ferry_command, ferry_env, local_clusters
from ferry.local import clusters as local

RESULTS = Path(__file__).resolve().parent / "results"


def _config(directory: Path, a: str, b: str) -> Path:
    path = directory / "ferry.yaml"
    path.write_text(
        "clusters:\n"
        f"  A: {{bootstrap.servers: '{a}'}}\n"
        f"  B: {{bootstrap.servers: '{b}'}}\n"
        "A->B.enabled: true\n"
        "topics: orders\n"
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


def _commit_groups(a: str, groups: int, partitions: int, per_partition: int) -> None:
    chosen = random.Random(groups * 1000 + partitions)
    for g in range(groups):
        consumer = Consumer({"bootstrap.servers": a, "group.id": f"app-{g:05d}"})
        offsets = [
            TopicPartition("orders", p, chosen.randint(1, per_partition)) for p in range(partitions)
        ]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()


def _groups_with_offsets(b: str, groups: int) -> int:
    admin = AdminClient({"bootstrap.servers": b})
    found = 0
    for g in range(groups):
        name = f"app-{g:05d}"
        answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)])
        partitions = answer[name].result(30).topic_partitions or []
        found += any(tp.offset >= 0 for tp in partitions)
    return found


def run_shape(groups: int, partitions: int, records: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ferry-bench-rto-") as tmp:
        directory = Path(tmp)
        with local_clusters(directory) as (a, b):
            create_topic(a, "orders", partitions)
            producer = Producer({"bootstrap.servers": a, "linger.ms": 5})
            for i in range(records):
                producer.produce("orders", value=b"x" * 100, partition=i % partitions)
            producer.flush(120)
            del producer
            _commit_groups(a, groups, partitions, records // partitions)
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
            local.kill_node(directory, "A", 1, signal.SIGKILL)  # the datacenter is lost
            began = time.monotonic()
            failover = subprocess.run(
                ferry_command("failover", "-c", str(config), "--flow", "A->B", "--json"),
                capture_output=True,
                text=True,
                env=ferry_env(),
                check=False,
            )
            seconds = time.monotonic() - began
            report = json.loads(failover.stdout) if failover.stdout.strip() else {}
            statuses = [g["status"] for g in report.get("groups", [])]
            return {
                "groups": groups,
                "partitions": partitions,
                "records": records,
                "copy_seconds": round(copy_seconds, 1),
                "failover_seconds": round(seconds, 1),
                "exit_code": failover.returncode,
                "moved": statuses.count("moved"),
                "other": len(statuses) - statuses.count("moved"),
                "groups_with_offsets_on_b": _groups_with_offsets(b, groups),
                "recovery_point": (report.get("recovery_point") or {}).get("kind"),
            }


def write(rows: list[dict[str, Any]]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rto.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# Recovery time: `ferry failover --flow A->B` with A lost",
        "",
        "Single-broker clusters on this 2-core machine; A's node killed after `ferry run "
        "--once` (copy and checkpoints); `python -m bench.rto`.",
        "",
        "| groups | partitions | failover (s) | moved | not moved | groups with offsets on B "
        "| exit |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['groups']:,} | {r['partitions']:,} | {r['failover_seconds']} | {r['moved']:,} "
        f"| {r['other']:,} | {r['groups_with_offsets_on_b']:,} | {r['exit_code']} |"
        for r in rows
    ]
    (RESULTS / "rto.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="10x8,300x50", help="groups x partitions, ...")
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    rows = []
    for shape in args.shapes.split(","):
        groups, partitions = (int(n) for n in shape.split("x"))
        row = run_shape(groups, partitions, args.records)
        print(json.dumps(row))
        rows.append(row)
    write(rows)


if __name__ == "__main__":
    main()
