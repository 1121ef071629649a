"""`ferry demo`: two real local clusters, a record written to and read back from each.

Replication joins the tour once the engine lands; for now the demo proves the ground works:
real brokers on this machine, keys, headers and timestamps going in and coming back out.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ferry.local import clusters as local

__all__ = ["run_demo"]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _round_trip(bootstrap: str, topic: str, key: bytes, value: bytes) -> tuple[object, ...]:
    """Create `topic`, produce one record with acks=all, and read it back."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=value, key=key, headers=[("via", b"demo")])
    if producer.flush(30) != 0:
        raise RuntimeError(f"record to {topic} on {bootstrap} was not acknowledged")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ferry-demo-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                raw = msg.headers() or []
                pairs = raw.items() if isinstance(raw, dict) else raw
                headers = ", ".join(f"{k}={_text(v)}" for k, v in pairs)
                return (
                    msg.partition(),
                    msg.offset(),
                    _text(msg.key()),
                    _text(msg.value()),
                    headers,
                )
        raise RuntimeError(f"record produced to {topic} on {bootstrap} was not read back in 30 s")
    finally:
        consumer.close()


def run_demo(console: Console, directory: Path, *, keep: bool = False) -> None:
    console.rule("[bold]ferry demo[/]")
    console.print(
        "Starting two independent Apache Kafka clusters, [bold]A[/] and [bold]B[/], on "
        "127.0.0.1. Each is a real broker+controller (KRaft) JVM, as a datacenter would run."
    )
    started = time.monotonic()
    brokers = local.up(["A", "B"], directory)
    console.print(f"Both answered in {time.monotonic() - started:.1f} s:")
    for alias, broker in brokers.items():
        console.print(
            f"  {alias}: {broker.bootstrap} (pid {broker.pid}, data in {broker.directory})"
        )
    try:
        table = Table(title="\none record written to and read back from each cluster")
        for column in ("cluster", "topic", "part", "offset", "key", "value", "headers"):
            table.add_column(column, no_wrap=True)
        for alias, broker in brokers.items():
            topic = f"orders-{uuid.uuid4().hex[:4]}"
            record = _round_trip(
                broker.bootstrap, topic, b"order-1", f"hello from {alias}".encode()
            )
            table.add_row(alias, topic, *(str(x) for x in record))
        console.print(table)
        console.print(
            "\nWhat you saw: each cluster stored the record with its key and headers and gave it "
            "back from offset 0. Replication from A to B (ferry run) builds on exactly this.\n"
        )
    finally:
        if keep:
            console.print(
                f"Clusters left running; stop them with: ferry local down --dir {directory}"
            )
        else:
            local.down(directory)
            console.print("Clusters stopped; no process or port left behind.")
