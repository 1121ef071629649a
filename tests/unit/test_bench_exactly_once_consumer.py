"""The exactly-once consumer benchmark's pure parts: run specs, MM2's exactly-once settings,
the transactions table, consumer latency, its markdown and its chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench.exactly_once_consumer import RunSpec, chart, markdown, parse_runs
from bench.java_tools import (
    mm2_exactly_once_settings,
    mm2_properties,
    parse_transactions_list,
)
from bench.latency import consumer_latency, stamped_value

LIST_OUTPUT = """\
TransactionalId                          Coordinator ProducerId  TransactionState
mm2-0123456789ab-MirrorSourceConnector-1 1           1001        CompleteCommit
ferry:A->B:eoc-1-x:0:1                   1           7           Ongoing
mm2-0123456789ab-MirrorSourceConnector-0 1           1000        CompleteCommit
"""


def test_runs_parse_in_order_with_commit_intervals() -> None:
    runs = parse_runs("ferry-eos, mm2-eos,ferry-eos:50,ferry-alos,mm2-alos")
    assert [r.kind for r in runs] == ["ferry-eos", "mm2-eos", "ferry-eos", "ferry-alos", "mm2-alos"]
    assert runs[2].commit_interval_ms == 50
    assert runs[2].ferry_settings() == [
        "exactly.once.source.support=enabled",
        "ferry.commit.interval.ms=50",
    ]
    assert runs[3].ferry_settings() == []


@pytest.mark.parametrize("text", ["", "mm2-eos:50", "ferry-eos:0", "ferry-eos:x", "kafka"])
def test_bad_runs_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_runs(text)


def test_extra_ferry_settings_go_to_ferry_runs_only() -> None:
    eos, mm2 = parse_runs("ferry-eos:25,mm2-eos", ("B.producer.retry.backoff.ms=10",))
    assert eos.ferry_settings() == [
        "exactly.once.source.support=enabled",
        "ferry.commit.interval.ms=25",
        "B.producer.retry.backoff.ms=10",
    ]
    assert eos.label.endswith(", B.producer.retry.backoff.ms=10")
    assert mm2.extra == ()


def test_ferry_default_commit_interval_is_ferrys_own() -> None:
    # None: ferry's default for the mode (exactly-once commits far more often).
    assert RunSpec("ferry-eos").interval_ms < RunSpec("ferry-alos").interval_ms
    assert RunSpec("ferry-eos", 25).interval_ms == 25
    assert "25 ms" in RunSpec("ferry-eos", 25).label


def test_mm2_exactly_once_is_set_for_the_target_cluster() -> None:
    settings = mm2_exactly_once_settings(8099)
    # The dedicated-mode worker reads worker settings under the target's prefix only.
    assert settings["B.exactly.once.source.support"] == "enabled"
    assert "exactly.once.source.support" not in settings
    assert settings["dedicated.mode.enable.internal.rest"] == "true"
    assert settings["listeners"] == "http://127.0.0.1:8099"
    assert settings["A.consumer.isolation.level"] == "read_committed"


def test_mm2_defaults_of_other_benches_stay_without_exactly_once() -> None:
    settings = mm2_properties(("a:1", "b:2"), "t", 8, "run")
    assert not any("exactly.once" in key for key in settings)
    assert "dedicated.mode.enable.internal.rest" not in settings


def test_transactions_table_parses_sorted() -> None:
    rows = parse_transactions_list("some warning\n" + LIST_OUTPUT)
    assert [r.transactional_id for r in rows] == [
        "ferry:A->B:eoc-1-x:0:1",
        "mm2-0123456789ab-MirrorSourceConnector-0",
        "mm2-0123456789ab-MirrorSourceConnector-1",
    ]
    assert rows[1].producer_id == 1000
    assert rows[0].state == "Ongoing"


def test_transactions_table_without_header_is_an_error() -> None:
    with pytest.raises(ValueError, match="no TransactionsCommand"):
        parse_transactions_list("Exception in thread main\n")


def test_consumer_latency_is_receive_time_minus_the_stamp() -> None:
    value = stamped_value(b"\0" * 64, 1_000_000)
    assert consumer_latency(1_000_250.5, value) == 250.5


def _summary(p50: float) -> dict[str, float]:
    return {
        "count": 300_000,
        "p50_ms": p50,
        "p90_ms": p50 * 2,
        "p99_ms": p50 * 3,
        "p999_ms": p50 * 4,
        "max_ms": p50 * 5,
    }


def _result() -> dict[str, Any]:
    runs = []
    for spec, p50, ids in (
        (RunSpec("ferry-eos", 50), 40.0, ["ferry:A->B:t:0", "ferry:A->B:t:0:1"]),
        (RunSpec("mm2-eos"), 30.0, ["mm2-r-MirrorSourceConnector-0"]),
        (RunSpec("ferry-alos"), 10.0, []),
    ):
        runs.append(
            {
                "kind": spec.kind,
                "label": spec.label,
                "started": "2026-11-26T14:00:05+00:00",
                "append": _summary(p50 / 2),
                "consumer": _summary(p50),
                "cpu_share": 0.4,
                "markers_per_second": 80.0 if ids else 0.0,
                "transactional_ids": [
                    {"transactional_id": i, "coordinator": 1, "producer_id": 3, "state": "Empty"}
                    for i in ids
                ],
            }
        )
    return {
        "date": "2026-11-26T14:00:00+00:00",
        "cpu_count": 2,
        "kafka_version": "4.1.1",
        "librdkafka": "2.16.0",
        "rate": 5000.0,
        "seconds": 60.0,
        "warmup_seconds": 15.0,
        "partitions": 8,
        "value_bytes": 1024,
        "mm2_exactly_once_settings": {"B.exactly.once.source.support": "enabled"},
        "runs": runs,
    }


def test_markdown_has_a_row_per_run_and_the_ids() -> None:
    text = markdown(_result())
    row = "| ferry exactly-once, commit interval 50 ms | 14:00 | 20 | 60 | 80 | 40 | **120** |"
    assert row in text
    assert "`B.exactly.once.source.support = enabled`" in text
    assert "- ferry at-least-once, commit interval 1000 ms: none" in text
    assert "`mm2-r-MirrorSourceConnector-0`" in text


def test_chart_is_written(tmp_path: Path) -> None:
    path = chart(_result(), tmp_path / "eoc.png")
    assert path.read_bytes().startswith(b"\x89PNG")
