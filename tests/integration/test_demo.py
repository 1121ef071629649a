"""`ferry demo` (what `make demo` runs) replicates all its traffic and cleans up after itself.

Its own process (it starts and stops its clusters and its Spark), with 4 s of traffic instead
of the demo's 15 (FERRY_DEMO_TRAFFIC_SECONDS): 12,000 records, the same acts.
"""

from __future__ import annotations

import re
from pathlib import Path

import psutil
import pytest

from tests.ferry_cli import run_ferry_process

pytestmark = [pytest.mark.integration, pytest.mark.processes]

PARTITIONS = {"orders": 3, "payments": 2}
SHORT = {"FERRY_DEMO_TRAFFIC_SECONDS": "4"}


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_demo_replicates_every_record_from_a_to_b_and_stops_the_clusters(tmp_path: Path) -> None:
    result = run_ferry_process("demo", "--dir", str(tmp_path), env=SHORT, timeout=280)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr

    produced = re.search(
        r"the producer wrote ([\d,]+) records \(orders ([\d,]+), payments ([\d,]+)\)", out
    )
    assert produced, out
    assert "writes 3,000 records/s into A for 4 s" in out, out
    total = _number(produced[1])
    per_topic = {"orders": _number(produced[2]), "payments": _number(produced[3])}
    assert total == sum(per_topic.values()) and total >= 10_000, out

    # One table row per topic: source topic, records on A, remote topic, records on B, ...
    for topic, partitions in PARTITIONS.items():
        row = re.search(
            rf"│ {topic}\s+│\s+([\d,]+) │ A\.{topic}\s+│\s+([\d,]+) │ (\d+)/(\d+)\s+│ (\w+)", out
        )
        assert row, f"no row for {topic}:\n{out}"
        on_a, on_b = _number(row[1]), _number(row[2])
        assert on_a == per_topic[topic] and on_b == on_a, row[0]
        assert (int(row[3]), int(row[4])) == (partitions, partitions), row[0]
        assert row[5] == "yes", row[0]

    # The sample copy carries the user's header and ferry's provenance, and matches its source.
    assert "header     app=demo-shop" in out, out
    assert re.search(r"header     ferry\.origin=[^|\s]+\|A\|\d+\|\d+\|orders", out), out
    assert "the copy has its key, value, timestamp and headers, plus ferry.origin" in out, out
    assert "What you saw:" in out, out

    # Act 2: A is lost, the group fails over to B from checkpoints and loses nothing.
    assert "A's broker is killed" in out, out
    assert "translating from the checkpoints in B" in out, out
    assert "lost 0, read twice 0" in out, out
    # A is down for the whole act: ferry says so in its own words, librdkafka never does, and
    # neither Spark nor its JVM has a line for the console (they go to spark.log).
    everything = out + result.stderr
    raw_librdkafka = re.findall(r"^.*%\d\|\d+\.\d+\|.*$", everything, re.MULTILINE)
    assert not raw_librdkafka and "|FAIL|" not in everything, raw_librdkafka[:5]
    jvm = re.findall(r"^.*\b(?:WARN|WARNING|ERROR)\b.*$", everything, re.MULTILINE)
    assert not jvm, jvm[:5]

    assert "Clusters stopped; no process or port left behind." in out
    pids = [int(pid) for pid in re.findall(r"\(pid (\d+),", out)]
    assert len(pids) == 2, out
    for pid in pids:
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue  # gone: as it should be
        assert not any(str(tmp_path) in arg for arg in cmdline), pid
    assert not tmp_path.exists() or not any(tmp_path.iterdir()), list(tmp_path.iterdir())
