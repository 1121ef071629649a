"""`ferry status`'s pure parts: the newest heartbeat of a source, lag per partition."""

from __future__ import annotations

from ferry.kafka.mm2_records import Checkpoint, Heartbeat
from ferry.ops.status import FlowStatus, PartitionStatus, newest_heartbeat, partition_statuses


def beat(source: str, target: str, ts: int) -> tuple[bytes | None, bytes | None]:
    h = Heartbeat(source, target, ts)
    return h.key_bytes(), h.value_bytes()


def test_newest_heartbeat_of_the_source_whatever_its_target() -> None:
    records = [beat("A", "B", 100), beat("A", "C", 300), beat("A", "B", 200), beat("C", "A", 900)]
    assert newest_heartbeat(records, "A") == 300
    assert newest_heartbeat(records, "C") == 900
    assert newest_heartbeat(records, "B") is None


def test_records_that_are_not_heartbeats_are_ignored() -> None:
    cp = Checkpoint("g", "A.t", 0, 1, 1)
    records = [(None, None), (b"junk", b"junk"), (cp.key_bytes(), cp.value_bytes())]
    assert newest_heartbeat([*records, beat("A", "B", 5)], "A") == 5
    assert newest_heartbeat(records, "A") is None


def test_lag_is_source_end_minus_replicated_position_never_negative() -> None:
    replicated = {("orders", 0): 10, ("orders", 1): 9}
    ends = {("orders", 1): 12, ("orders", 0): 10, ("new", 0): 4, ("orders", 2): 0}
    assert partition_statuses(ends, replicated) == [
        PartitionStatus("new", 0, 4, 0, 4),
        PartitionStatus("orders", 0, 10, 10, 0),
        PartitionStatus("orders", 1, 12, 9, 3),
        PartitionStatus("orders", 2, 0, 0, 0),
    ]
    # a position past the end (the source was recreated) is no negative lag
    assert partition_statuses({("orders", 0): 3}, replicated)[0].lag == 0


def test_json_shape() -> None:
    status = FlowStatus(
        "A->B", 12, 5, 50, 1, [PartitionStatus("t", 0, 6, 5, 1)], latency_from="heartbeats"
    )
    assert status.to_json() == {
        "latency_ms": 12,
        "records": 5,
        "bytes": 50,
        "lag": 1,
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "source_end": 6,
                "replicated": 5,
                "lag": 1,
                "rpo_seconds": None,
                "lost": 0,
                "lost_offsets": "",
                "held": "",
            }
        ],
        "errors": [],
        "executors": {},
        "spark_ui": None,
        "rpo_seconds": None,
        "lost": 0,
        "latency_from": "heartbeats",
    }
