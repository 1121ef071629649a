"""The short fault test: exactly-once through a kill, a broker bounce and a stop.

Its own two clusters (the target's broker is killed), steady traffic into A, `ferry run` in
exactly-once mode SIGKILLed, the target broker SIGKILLed, ferry SIGTERMed, each restarted.
`make chaos` runs it, then the long version (nine faults, both modes, at least 100,000
records). At least 50 s of traffic and three Spark starts: a `system` test, outside `make test`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.harness import SHORT_SCHEDULE, ChaosSettings, run_chaos

pytestmark = pytest.mark.system


def test_exactly_once_through_kills_and_a_broker_bounce(tmp_path: Path) -> None:
    settings = ChaosSettings(
        mode="exactly-once",
        schedule=SHORT_SCHEDULE,
        rate=200,
        min_records=10_000,
        batch_max_records=20_000,
        progress_between_faults=500,
        max_jitter_seconds=2.0,
    )
    report = run_chaos(settings, tmp_path)
    summary = {k: v for k, v in report.as_json().items() if k != "partitions"}
    assert report.acked_missing_in_source == 0, summary
    assert report.source_records >= 10_000, summary
    assert (report.lost, report.duplicated, report.reordered) == (0, 0, 0), summary
    assert (report.mismatched, report.foreign) == (0, 0), summary
    assert report.copies == report.source_records, summary
    assert len(report.faults) == len(SHORT_SCHEDULE), summary
