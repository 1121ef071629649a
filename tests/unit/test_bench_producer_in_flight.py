"""bench.producer_in_flight's report: medians over runs, one row per producer."""

from __future__ import annotations

from bench.producer_in_flight import markdown


def _run(p50: float, cpu: float, waiting: int) -> dict[str, float]:
    return {
        "p50_ms": p50,
        "p99_ms": p50 * 2,
        "cpu_cores": cpu,
        "most_requests_waiting": waiting,
        "most_records_in_flight": 100,
    }


def test_each_producer_gets_the_median_of_its_runs() -> None:
    report = {
        "rtt_ms": 20.0,
        "rate": 5000,
        "size": 1024,
        "seconds": 15.0,
        "runs": {
            "idempotent": [_run(30, 1.0, 1), _run(50, 0.2, 1), _run(31, 0.9, 1)],
            "not idempotent": [_run(29, 0.05, 5)],
        },
    }

    text = markdown(report)

    assert "| idempotent | 31.0 | 62.0 | 0.90 | 1 | 100 |" in text
    assert "| not idempotent | 29.0 | 58.0 | 0.05 | 5 | 100 |" in text
    assert "20.0 ms round trip" in text and "5,000 records/s of 1,024 B" in text
