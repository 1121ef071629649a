"""MirrorMaker 2's recovery time beside ferry's, for `bench.rto`.

MM2 has no failover command: its users script one, per group `RemoteClusterUtils.
translateOffsets` (the group's checkpoints MM2 wrote on the target) and an admin commit of
what it returns (`bench/java/Mm2Failover.java`, one group after another). Here MM2 copies A to
a cluster of its own, C: on B its remote topics and checkpoints would be ferry's
(`A.<topic>`, `A.checkpoints.internal`, the same names). It runs with its defaults but for
the checkpoints' pace (emitted every second, the groups and topics looked for every 5 s, no
offset sync to C's groups: the script commits them) until its checkpoints on C name every
partition of every group; then it is stopped, and once A is lost the script is timed.

Its remote topics are created on C first, one topic a request, as an MM2 user must by hand
at 100 topics of 100 partitions: MM2 (4.1) asks for all of them in one CreateTopics request,
which a Kafka 4 controller refuses whole (`PolicyViolationException: Unable to perform
excessively large batch operation`, over 10,000 metadata records), and MM2 asks again, the
same way, at every topic refresh, copying nothing meanwhile. `refused_creations` counts those
refusals in MM2's log.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from bench import java_tools
from bench.harness import MeasuredProcess, create_topic
from ferry.kafka.mm2_records import Checkpoint

SCRIPT = Path(__file__).resolve().parent / "java" / "Mm2Failover.java"
TP = tuple[str, int]
CHECKPOINTS = "A.checkpoints.internal"  # MM2's, on C, of the flow from A


def settings(a: str, c: str, topics: str, groups: str) -> dict[str, str]:
    run_id = uuid.uuid4().hex[:12]
    return {
        "clusters": "A, C",
        "A.bootstrap.servers": a,
        "C.bootstrap.servers": c,
        "A->C.enabled": "true",
        "A->C.topics": topics,
        "A->C.groups": groups,
        "C->A.enabled": "false",
        "C->A.emit.heartbeats.enabled": "false",
        "tasks.max": "4",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.groups.interval.seconds": "5",
        "refresh.topics.interval.seconds": "5",
        "sync.group.offsets.enabled": "false",
        **java_tools.mm2_run_storage(run_id, "C"),
    }


def refused_creations(directory: Path) -> int:
    """MM2's remote topic creations the target refused (its log's warnings)."""
    log = directory / "mm2.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return text.count("WARN Could not create topic")


def start(
    directory: Path, a: str, c: str, topics: str, groups: str, remote: list[tuple[str, int]]
) -> MeasuredProcess:
    """MM2 copying `topics` from A to C, its `remote` topics (name, partitions) created first."""
    for topic, partitions in remote:
        create_topic(c, topic, partitions)
    directory.mkdir(parents=True, exist_ok=True)
    properties = java_tools.write_properties(
        directory / "mm2.properties", settings(a, c, topics, groups)
    )
    log_config = java_tools.write_log_config(directory, "mm2")
    return MeasuredProcess(java_tools.mm2_command(properties, log_config), directory / "mm2")


def await_checkpoints(
    c: str, expected: dict[str, list[TP]], mm2: MeasuredProcess, timeout: float
) -> float:
    """Seconds until MM2's checkpoints on C name every (group, partition) of `expected` (by
    its remote topic `A.<topic>`); RuntimeError if MM2 exits or `timeout` passes first."""
    wanted = {(g, f"A.{t}", p) for g, partitions in expected.items() for t, p in partitions}
    seen: set[tuple[str, str, int]] = set()
    consumer = Consumer(
        {"bootstrap.servers": c, "group.id": "bench-rto-mm2", "enable.auto.commit": False}
    )
    began = time.monotonic()
    assigned = False
    try:
        while not wanted <= seen:
            mm2.sample()
            if mm2.poll() is not None:
                raise RuntimeError(f"MM2 exited {mm2.returncode}:\n{mm2.stderr_tail()}")
            if time.monotonic() - began > timeout:
                raise RuntimeError(
                    f"MM2's checkpoints named {len(seen & wanted):,} of {len(wanted):,} group "
                    f"partitions after {timeout:.0f} s"
                )
            if not assigned:
                topics = consumer.list_topics(timeout=10).topics
                if CHECKPOINTS not in topics:
                    time.sleep(1)
                    continue
                partitions = topics[CHECKPOINTS].partitions
                consumer.assign([TopicPartition(CHECKPOINTS, p, 0) for p in partitions])
                assigned = True
            for msg in consumer.consume(5000, 1.0):
                if msg.error() is None and msg.key() and msg.value():
                    cp = Checkpoint.from_bytes(msg.key(), msg.value())
                    seen.add((cp.group, cp.topic, cp.partition))
    finally:
        consumer.close()
    return time.monotonic() - began


def scripted_failover(c: str, groups: list[str], directory: Path) -> dict[str, Any]:
    """`Mm2Failover.java` for every group (A lost), timed as a command and in its loop."""
    listed = directory / "groups.txt"
    listed.write_text("\n".join(groups) + "\n")
    log_config = java_tools.write_log_config(directory, "mm2-failover")
    command = java_tools.java_command(str(SCRIPT), [c, "A", str(listed)], log_config)
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - began
    lines = done.stdout.strip().splitlines()
    report: dict[str, Any] = json.loads(lines[-1]) if done.returncode == 0 and lines else {}
    return {
        "command_seconds": round(seconds, 1),
        "loop_seconds": report.get("seconds"),
        "groups_moved": report.get("groups_moved"),
        "partitions": report.get("partitions"),
        "groups_without_checkpoints": report.get("groups_without_checkpoints"),
        "exit_code": done.returncode,
        "stderr": done.stderr[-2000:] if done.returncode else "",
    }
