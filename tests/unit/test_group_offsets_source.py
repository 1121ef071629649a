"""No ferry code reads a group's committed offsets through the admin API (see
kafka/group_offsets.py: a consumer of the group reads them)."""

from __future__ import annotations

from pathlib import Path


def test_no_ferry_code_reads_group_offsets_through_the_admin_api() -> None:
    # librdkafka 2.16 crashes the process (NULL dereference in rd_kafka_cgrp_op) when an
    # admin client's OffsetFetch answer says the coordinator is not available or moved, as a
    # cluster creating __consumer_offsets answers: a `ferry run --api-port` died so at start.
    source = Path(__file__).resolve().parents[2] / "src" / "ferry"
    callers = [
        str(path.relative_to(source))
        for path in sorted(source.rglob("*.py"))
        if "list_consumer_group_offsets" in path.read_text()
    ]
    assert callers == []
