"""The native copy loop against real brokers: what the Python loop's unit tests pin with fakes.

copy_bin_native runs the C loop (src/ferry/engine/copy/native/fastcopy.c) with its own librdkafka
consumer and producer; each test reads back what landed in the target.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.engine.copy.client_settings import consumer_settings, producer_settings
from ferry.engine.copy.lease import LeaseTerms, run_lease
from ferry.engine.copy.native_loop import NativeCopier, copy_bin_native, native_module
from ferry.engine.copy.types import EARLIEST, OPEN, CopyContext, CopyRange
from ferry.errors import ReplicationError
from ferry.kafka.offset_runs import OffsetRun
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_offsets
from tests.integration.replication_setup import write_config

pytestmark = pytest.mark.skipif(native_module() is None, reason="native copier not built")

NOW_MS = int(time.time() * 1000)
SOURCE_ID, TARGET_ID = "source-id", "target-id"


@pytest.fixture
def copier(
    kafka_clusters: dict[str, LocalCluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[NativeCopier]:
    from ferry.config import load_config

    config = load_config(write_config(tmp_path_factory.mktemp("cfg"), kafka_clusters, topics="x"))
    flow = config.flow("A", "B")
    native = NativeCopier(
        consumer_settings(config.clusters["A"], flow), producer_settings(config.clusters["B"])
    )
    yield native
    native.close()


def _ctx(clusters: dict[str, LocalCluster]) -> CopyContext:
    a, b = clusters["A"].bootstrap, clusters["B"].bootstrap
    return CopyContext("A", a, SOURCE_ID, "B", b, TARGET_ID, stall_timeout=20.0)


def _setup(
    clusters: dict[str, LocalCluster], topic: str, records: list[Rec], **remote: str
) -> None:
    create_topic(clusters["A"].bootstrap, topic, 1)
    create_topic(clusters["B"].bootstrap, f"A.{topic}", 1, **remote)
    produce(clusters["A"].bootstrap, topic, records)


def _rec(i: int, headers: tuple[tuple[str, bytes | None], ...] = ()) -> Rec:
    return Rec(0, f"k{i}".encode(), f"v{i}".encode(), headers, NOW_MS + i)


def test_copies_are_faithful_and_runs_exact(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, copier: NativeCopier
) -> None:
    records = [_rec(i, (("h", b"1"), ("h", None)) if i % 2 else ()) for i in range(300)]
    records[7] = Rec(0, None, None, (), NOW_MS)  # a tombstone without key
    _setup(kafka_clusters, topic_name, records)
    ranges = [CopyRange(topic_name, 0, EARLIEST, 200, f"A.{topic_name}", 1_000_000)]

    first = copy_bin_native(copier, ranges, _ctx(kafka_clusters))
    rest = copy_bin_native(
        copier,
        [CopyRange(topic_name, 0, 200, 300, f"A.{topic_name}", 1_000_000)],
        _ctx(kafka_clusters),
    )

    assert [r.copied for r in first + rest] == [200, 100]
    assert first[0].runs == [OffsetRun(0, 0, 200)] and rest[0].runs == [OffsetRun(200, 200, 100)]
    copied = read_offsets(kafka_clusters["B"].bootstrap, f"A.{topic_name}", 1, 300)[0]
    for (offset, got), want in zip(copied, records, strict=True):
        origin = [v for k, v in got.headers if k == ORIGIN_HEADER]
        assert got.headers[: len(want.headers)] == want.headers
        assert (got.key, got.value, got.timestamp) == (want.key, want.value, want.timestamp)
        assert origin == [Origin(SOURCE_ID, "A", topic_name, 0, offset).to_bytes()]


def test_a_backlog_copied_in_slices_that_do_not_settle_lands_once_and_in_order(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, copier: NativeCopier
) -> None:
    # A backlog copied in a lease's short slices that do not wait for acks: copies still in
    # flight at a slice's end carry over, their reports come in a later slice. None may be
    # lost, doubled or reordered, and the runs stay exact.
    per_partition = 1500
    records = [
        Rec(p, f"k{i}".encode(), b"v" * 900 + str(i).encode(), (), NOW_MS + i)
        for i in range(per_partition)
        for p in (0, 1)
    ]
    create_topic(kafka_clusters["A"].bootstrap, topic_name, 2)
    create_topic(kafka_clusters["B"].bootstrap, f"A.{topic_name}", 2)
    produce(kafka_clusters["A"].bootstrap, topic_name, records)
    ranges = [
        CopyRange(topic_name, p, EARLIEST, OPEN, f"A.{topic_name}", 1_000_000) for p in (0, 1)
    ]
    ctx = _ctx(kafka_clusters)
    positions = {(topic_name, p): 0 for p in (0, 1)}
    done = {(topic_name, p): per_partition for p in (0, 1)}
    runs: dict[int, list[OffsetRun]] = {0: [], 1: []}

    def commit(results: list[Any]) -> None:
        for result in results:
            runs[result.partition] += result.runs
            positions[(result.topic, result.partition)] = result.end

    deadline = time.monotonic() + 60
    terms = LeaseTerms(
        seconds=60,
        commit_interval=0.02,
        stop_requested=lambda: positions == done or time.monotonic() > deadline,
    )
    run_lease(
        ranges, dict(positions), terms, lambda w, s: copy_bin_native(copier, w, ctx, s), commit
    )

    assert positions == done
    for p in (0, 1):
        assert _merged(runs[p]) == [OffsetRun(0, 0, per_partition)]
    copied = read_offsets(kafka_clusters["B"].bootstrap, f"A.{topic_name}", 2, 2 * per_partition)
    for p in (0, 1):
        assert [got.value for _offset, got in copied[p]] == [
            r.value for r in records if r.partition == p
        ]


def _merged(runs: list[OffsetRun]) -> list[OffsetRun]:
    """Adjacent runs joined: slices cut a partition's copies into several."""
    out: list[OffsetRun] = []
    for run in sorted(runs, key=lambda r: r.upstream_start):
        last = out[-1] if out else None
        if (
            last is not None
            and run.upstream_start == last.upstream_start + last.count
            and run.downstream_start == last.downstream_start + last.count
        ):
            out[-1] = OffsetRun(last.upstream_start, last.downstream_start, last.count + run.count)
        else:
            out.append(run)
    return out


def test_records_from_the_target_are_skipped_and_foreign_origins_kept(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, copier: NativeCopier
) -> None:
    foreign = Origin("third-id", "C", "orders", 3, 42).to_bytes()
    own = Origin(TARGET_ID, "B", "orders", 0, 1).to_bytes()
    records = [_rec(0), _rec(1, ((ORIGIN_HEADER, own),)), _rec(2, ((ORIGIN_HEADER, foreign),))]
    _setup(kafka_clusters, topic_name, records)

    [result] = copy_bin_native(
        copier, [CopyRange(topic_name, 0, 0, 3, f"A.{topic_name}", 1_000_000)], _ctx(kafka_clusters)
    )

    assert (result.copied, result.skipped) == (2, 1)
    assert result.runs == [OffsetRun(0, 0, 1), OffsetRun(2, 1, 1)]  # offset 1 was not copied
    copied = read_offsets(kafka_clusters["B"].bootstrap, f"A.{topic_name}", 1, 2)[0]
    assert copied[1][1].headers == ((ORIGIN_HEADER, foreign),)


def test_a_record_too_large_for_the_target_halts_at_its_offset(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, copier: NativeCopier
) -> None:
    records = [_rec(i) for i in range(5)]
    records[3] = Rec(0, b"big", b"x" * 30_000, (), NOW_MS)
    _setup(kafka_clusters, topic_name, records, **{"max.message.bytes": "20000"})

    with pytest.raises(ReplicationError) as info:
        copy_bin_native(
            copier,
            [CopyRange(topic_name, 0, 0, 5, f"A.{topic_name}", 20_000)],
            _ctx(kafka_clusters),
        )

    text = str(info.value)
    assert f"topic {topic_name}, partition 0, offset 3" in text
    assert f"raise max.message.bytes of topic A.{topic_name} on B to at least" in text
    assert copier.broken


def test_records_deleted_by_retention_are_counted_as_expired(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, copier: NativeCopier
) -> None:
    _setup(kafka_clusters, topic_name, [_rec(i) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": kafka_clusters["A"].bootstrap})
    deleted = admin.delete_records([TopicPartition(topic_name, 0, 40)])
    for future in deleted.values():
        future.result(30)

    [result] = copy_bin_native(
        copier,
        [CopyRange(topic_name, 0, 0, 100, f"A.{topic_name}", 1_000_000)],
        _ctx(kafka_clusters),
    )

    assert (result.expired, result.copied) == (40, 60)
    assert result.runs == [OffsetRun(40, 0, 60)]
