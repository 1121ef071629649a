"""The steady-rate sweep's pure helpers: rates, ratios, its markdown and its chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench.plot import chart_path, series, sweep_chart
from bench.stats import cpu_share
from bench.sweep import (
    by_rate,
    ferry_vs_mm2,
    lease_gaps,
    markdown_lines,
    parse_rates,
    readback_timeout,
)

SETTINGS = {
    "rates": [1000.0, 5000.0],
    "seconds": 30.0,
    "warmup": 10.0,
    "settle": 30.0,
    "partitions": 8,
    "value_bytes": 1024,
    "timeout": 1800.0,
}


def run(replicator: str, rate: float, p99: float, share: float, **extra: float) -> dict[str, Any]:
    return {
        "replicator": replicator,
        "rate": rate,
        "seconds": 30.0,
        "records": int(rate * 30),
        "sent_per_second": extra.get("sent", rate),
        "p50_ms": p99 / 4,
        "p90_ms": p99 / 2,
        "p99_ms": p99,
        "p999_ms": p99 * 2,
        "max_ms": p99 * 3,
        "cpu_seconds": share * 30,
        "cpu_share": share,
        "caught_up_seconds": extra.get("caught_up", 0.1),
        "load_before": 1.0,
    }


RUNS = [
    run("ferry", 1000.0, 20.0, 0.1),
    run("ferry", 5000.0, 40.0, 0.3),
    run("mm2", 1000.0, 80.0, 0.2),
    run("mm2", 5000.0, 100.0, 0.6),
]


def test_rates_are_parsed_sorted_and_unique() -> None:
    assert parse_rates("50000,1000, 5000,1000") == [1000.0, 5000.0, 50000.0]
    assert parse_rates("2500.5") == [2500.5]


@pytest.mark.parametrize("text", ["", " , ", "1000,0", "-5", "fast"])
def test_rates_refuse_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rates(text)


def test_cpu_share_is_cpu_seconds_per_wall_second() -> None:
    assert cpu_share(15.0, 30.0) == 0.5
    assert cpu_share(60.0, 30.0) == 2.0
    with pytest.raises(ValueError):
        cpu_share(1.0, 0.0)


def test_ratios_per_rate_need_both_replicators() -> None:
    rows = ferry_vs_mm2([*RUNS, run("ferry", 20000.0, 50.0, 0.9)])
    assert rows == [
        {"rate": 1000.0, "p99_ratio": 0.25, "cpu_share_ratio": 0.5},
        {"rate": 5000.0, "p99_ratio": 0.4, "cpu_share_ratio": 0.5},
    ]


def test_ratio_against_zero_is_missing() -> None:
    rows = ferry_vs_mm2([run("ferry", 1000.0, 20.0, 0.1), run("mm2", 1000.0, 80.0, 0.0)])
    assert rows[0]["cpu_share_ratio"] is None


def test_runs_go_by_rate_then_ferry_first() -> None:
    ordered = by_rate([run("other", 1000.0, 1, 1), *reversed(RUNS)])
    assert [(r["rate"], r["replicator"]) for r in ordered] == [
        (1000.0, "ferry"),
        (1000.0, "mm2"),
        (1000.0, "other"),
        (5000.0, "ferry"),
        (5000.0, "mm2"),
    ]


def test_readback_allows_more_time_for_more_records() -> None:
    assert readback_timeout(0) == 120.0
    assert readback_timeout(1_500_000) == 420.0


def test_markdown_has_a_row_per_rate_and_replicator_and_the_ratios() -> None:
    sweep = {"settings": SETTINGS, "runs": RUNS, "ratios": ferry_vs_mm2(RUNS), "errors": {}}
    text = "\n".join(markdown_lines(sweep))
    assert "| 1,000 | ferry | 5 | 20 | 40 | 60 | 0.10 |" in text
    assert "| 5,000 | MirrorMaker 2 | 25 | 100 | 200 | 300 | 0.60 |" in text
    assert "| 1,000 | 0.25 x | 0.50 x |" in text
    assert "did not keep up" not in text


def test_markdown_says_what_went_wrong() -> None:
    runs = [run("ferry", 50000.0, 9000.0, 1.5, sent=30000.0, caught_up=40.0)]
    sweep = {
        "settings": SETTINGS,
        "runs": runs,
        "ratios": [],
        "errors": {"mm2": "TimeoutError: A.sweep-1 holds 5 of 9 records\nmore"},
    }
    text = "\n".join(markdown_lines(sweep))
    assert "ferry at 50,000/s: the producer reached only 30,000 records/s" in text
    assert "ferry at 50,000/s: did not keep up" in text
    assert "MirrorMaker 2: sweep ended early: TimeoutError: A.sweep-1 holds 5 of 9" in text
    assert "more" not in text
    assert "ferry / MM2" not in text  # no rate both finished


def test_series_are_one_replicators_values_by_rate() -> None:
    assert series(list(reversed(RUNS)), "mm2", "p99_ms") == ([1000.0, 5000.0], [80.0, 100.0])
    assert series(RUNS, "nobody", "p99_ms") == ([], [])


def test_chart_is_named_after_the_results(tmp_path: Path) -> None:
    assert chart_path(tmp_path, "latest") == tmp_path / "sweep.png"
    assert chart_path(tmp_path, "no-compression") == tmp_path / "no-compression-sweep.png"


def test_chart_is_a_png(tmp_path: Path) -> None:
    sweep = {"settings": SETTINGS, "runs": RUNS, "ratios": [], "errors": {}}
    path = sweep_chart(sweep, tmp_path / "out" / "sweep.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lease_gaps_come_from_ferrys_statistics(tmp_path: Path) -> None:
    stats = tmp_path / "stats.json"
    assert lease_gaps(stats) is None  # ferry did not run
    stats.write_text('{"records": 10}')
    assert lease_gaps(stats) is None  # one lease, no handover
    stats.write_text(
        '{"lease_gaps": 3, "lease_gap_seconds": 0.0125, "lease_gap_max_seconds": 0.4567}'
    )
    assert lease_gaps(stats) == {"count": 3, "max_ms": 456.7, "last_ms": 12.5}


def test_markdown_reports_the_longest_lease_gap() -> None:
    sweep = {
        "settings": SETTINGS,
        "runs": RUNS,
        "ratios": [],
        "errors": {},
        "ferry_lease_gaps": {"count": 3, "max_ms": 456.7, "last_ms": 12.5},
    }
    text = "\n".join(markdown_lines(sweep))
    assert "between leases 3 time(s)" in text and "457 ms" in text
