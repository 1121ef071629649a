"""The demo's second act: datacenter A is lost and a consumer group carries on in B.

A group reads part of `orders` on A and commits. ferry publishes its checkpoint (what
`ferry run` does every `emit.checkpoints.interval.seconds`). Then A's broker is killed, and
`ferry failover` commits the group's positions on B from the checkpoints alone. The group
reads on from there on B; the act counts the records it lost and the ones it read twice,
from the origin header of every copy, and fails loudly if either is not zero.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from rich.console import Console
from rich.table import Table

from ferry.config.model import FerryConfig
from ferry.errors import FerryError
from ferry.kafka import clients
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.offsets.failover import apply_failover, plan_failover
from ferry.sync.loop import SyncLoop
from ferry.terminal.console import rule, styled

__all__ = ["failover_act"]

GROUP = "billing"
TOPIC = "orders"
SHARE_READ_ON_A = 0.4  # of the records in orders, read on A before it is lost


def failover_act(console: Console, config: FerryConfig, brokers: dict[str, Any]) -> None:
    # The demo's own clients (the application's consumer group) use each cluster's admin
    # principal on secure clusters; ferry uses its own, from the config.
    a, b = brokers["A"].admin_settings, brokers["B"].admin_settings
    ends = _ends(a, TOPIC)
    rule(console, styled(("Act 2: datacenter A is lost", "bold")))
    console.print(
        styled(
            "A consumer group, ", (GROUP, "bold"), f", reads {TOPIC} on A and commits as it goes."
        ),
        soft_wrap=False,
    )
    consumed = _read_on_a(a, int(sum(ends.values()) * SHARE_READ_ON_A))
    console.print(
        f"  it has read {sum(len(v) for v in consumed.values()):,} of "
        f"{sum(ends.values()):,} records when A fails.",
        highlight=False,
    )
    plane = SyncLoop(config)
    try:
        plane.run_once()  # ferry run does this every emit.checkpoints.interval.seconds
    finally:
        plane.stop()
    console.print(
        "  ferry has published the group's position as an MM2 checkpoint in B "
        "(A.checkpoints.internal), translated exactly through its offset runs.",
        soft_wrap=False,
    )
    brokers["A"].kill()
    console.print(
        styled("  ", ("A's broker is killed", "bold red"), f" (pid {brokers['A'].pid}): A is gone.")
    )
    console.print(f"\n$ ferry failover group -c ferry.yaml {GROUP} --from A --to B")
    plan = plan_failover(config, GROUP, "A", "B", timeout=3.0)
    apply_failover(config, plan)
    for notice in plan.notices:
        console.print(f"  note: {notice}", highlight=False, markup=False)
    table = Table(title=f"group {GROUP} on B (from the checkpoints)")
    for column in ("partition", "read on A up to", "resumes on B at (A.orders)"):
        table.add_column(column, justify="right")
    for p in sorted(plan.positions, key=lambda p: p.partition):
        table.add_row(str(p.partition), f"{p.committed:,}", f"{p.offset:,}")
    console.print(table)
    read_on_b = _read_on_b(b, f"A.{TOPIC}", list(ends))
    lost, twice = _audit(ends, consumed, read_on_b)
    console.print(
        styled(
            f"The group read the other {sum(len(v) for v in read_on_b.values()):,} records on B. "
            "Checked by the origin header of every copy: ",
            (f"lost {lost}, read twice {twice}", "bold"),
            ".",
        ),
        soft_wrap=False,
    )
    if lost or twice:
        raise FerryError(f"failover lost {lost} and re-delivered {twice} records of {TOPIC}")
    console.print(
        "MirrorMaker 2 translates offsets approximately: after a failover it re-delivers up "
        "to offset.lag.max (100) records per partition. ferry records where every record "
        "landed, so the group resumes exactly.\n",
        soft_wrap=False,
    )


Settings = dict[str, str]


def _consumer(cluster: Settings, **settings: Any) -> Consumer:
    return clients.consumer(
        {
            **cluster,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **settings,
        }
    )


def _ends(cluster: Settings, topic: str) -> dict[int, int]:
    consumer = _consumer(cluster)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
    finally:
        consumer.close()


def _read_on_a(cluster: Settings, count: int) -> dict[int, list[int]]:
    """Read `count` records as the group, commit, leave: offsets read, per partition."""
    consumer = _consumer(cluster, **{"auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    read: dict[int, list[int]] = {}
    total = 0
    deadline = time.monotonic() + 60
    try:
        while total < count and time.monotonic() < deadline:
            for msg in consumer.consume(min(500, count - total), 0.5):
                partition, offset = msg.partition(), msg.offset()
                if msg.error() is None and partition is not None and offset is not None:
                    read.setdefault(partition, []).append(offset)
                    total += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return read


def _read_on_b(cluster: Settings, topic: str, partitions: list[int]) -> dict[int, list[int]]:
    """Read as the group from its committed offsets to the end: origin offsets, per partition."""
    # A partition the group never read on A has no checkpoint: it starts at the beginning,
    # as it would have on A (auto.offset.reset=earliest).
    consumer = _consumer(cluster, **{"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    read: dict[int, list[int]] = {p: [] for p in partitions}
    done: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(done) < len(partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                error, partition = msg.error(), msg.partition()
                assert partition is not None
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise FerryError(f"reading {topic} on B: {error.str()}")
                    done.add(partition)
                    continue
                header = dict(msg.headers() or ()).get(ORIGIN_HEADER)
                if not isinstance(header, bytes):
                    raise FerryError(f"{topic} partition {partition}: a copy without origin")
                read[partition].append(Origin.from_bytes(header).offset)
    finally:
        consumer.close()
    return read


def _audit(
    ends: dict[int, int], on_a: dict[int, list[int]], on_b: dict[int, list[int]]
) -> tuple[int, int]:
    lost = twice = 0
    for p, end in ends.items():
        seen = on_a.get(p, []) + on_b.get(p, [])
        twice += len(seen) - len(set(seen))
        lost += len(set(range(end)) - set(seen))
    return lost, twice
