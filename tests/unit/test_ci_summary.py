"""scripts/ci_summary.py: the per-suite table and the slowest tests, from JUnit XML reports."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ci_summary.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_summary", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_summary"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


ci_summary = _load()

# What pytest's --junitxml writes: a <testsuites> around one <testsuite>.
UNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="1"
 tests="5" time="62.5" timestamp="2026-11-26T07:00:00" hostname="h">
<testcase classname="tests.unit.test_a" name="test_fast" time="0.010" />
<testcase classname="tests.unit.test_a" name="test_slow[x-1]" time="40.000" />
<testcase classname="tests.unit.test_a.TestGroup" name="test_in_class" time="3.000">
<failure message="assert 1 == 2">boom</failure></testcase>
<testcase classname="tests.unit.test_b" name="test_skipped" time="0.000">
<skipped type="pytest.skip" message="no">skip</skipped></testcase>
<testcase classname="tests.unit.test_b" name="test_broken_fixture" time="1.000">
<error message="fixture failed">err</error></testcase>
</testsuite></testsuites>
"""

CLUSTER = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="1" time="300.0">
<testcase classname="tests.integration.test_spark_cluster" name="test_kill" time="250.5" />
</testsuite></testsuites>
"""


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    (tmp_path / "test.xml").write_text(UNIT)
    (tmp_path / "test-cluster.xml").write_text(CLUSTER)
    return tmp_path


def test_a_suite_counts_outcomes_and_rebuilds_node_ids(reports: Path) -> None:
    suite = ci_summary.read_suite("test", reports / "test.xml")
    assert suite.found and suite.seconds == 62.5
    assert (suite.count("passed"), suite.count("failed"), suite.count("skipped")) == (2, 2, 1)
    names = [c.name for c in suite.cases]
    assert names[1] == "tests/unit/test_a.py::test_slow[x-1]"
    assert names[2] == "tests/unit/test_a.py::TestGroup::test_in_class"


def test_a_missing_report_is_a_suite_not_found(tmp_path: Path) -> None:
    suite = ci_summary.read_suite("secure-test", tmp_path / "secure-test.xml")
    assert not suite.found and suite.cases == []
    assert "secure-test" in ci_summary.render([suite]) and "no report" in ci_summary.render([suite])


def test_the_table_totals_the_suites_and_lists_the_slowest_first(reports: Path) -> None:
    suites = [ci_summary.read_suite(n, reports / f"{n}.xml") for n in ("test", "test-cluster")]
    lines = ci_summary.render(suites, slowest=2).splitlines()
    row = {line.split()[0]: line.split()[1:] for line in lines if line[:1].isalpha()}
    assert row["test"] == ["2", "2", "1", "1:02.5"]
    assert row["test-cluster"] == ["1", "0", "0", "5:00.0"]
    assert row["all"] == ["3", "2", "1", "6:02.5"]
    slowest = lines[lines.index("The 2 slowest tests") + 1 :]
    assert [line.split()[-1] for line in slowest] == [
        "tests/integration/test_spark_cluster.py::test_kill",
        "tests/unit/test_a.py::test_slow[x-1]",
    ]
    assert slowest[0].split()[:3] == ["250.5", "s", "test-cluster"]


def test_the_command_line_shows_the_suites_in_the_order_asked(reports: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(reports), "--suites", "test-cluster,test,test-api"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = [line.split()[0] for line in result.stdout.splitlines()[3:6]]
    assert names == ["test-cluster", "test", "test-api"]
    assert "The 4 slowest tests" not in result.stdout  # 5 + 1 cases, 15 asked: all 6
    assert "The 6 slowest tests" in result.stdout
