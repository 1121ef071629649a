"""What CI ran: per suite, its tests passed/failed/skipped and its time; then the slowest tests.

Reads the JUnit XML reports pytest writes with --junitxml (one per suite, `<suite>.xml` in a
directory; `make <target> CI_REPORTS=<dir>` writes `<dir>/<target>.xml`). A suite listed but
without a report (it did not start, or pytest died) is shown as "no report".

    python scripts/ci_summary.py <dir> [--suites test,test-cluster,...] [--slowest 15]

Standard library only; exits 0 whatever the results (the suites' own exit codes say that).
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One test as the report gives it: pytest's node id, rebuilt, and its time."""

    name: str
    seconds: float
    outcome: str  # passed, failed, skipped


@dataclass
class Suite:
    name: str
    seconds: float = 0.0
    cases: list[Case] = field(default_factory=list)
    found: bool = True

    def count(self, outcome: str) -> int:
        return sum(1 for c in self.cases if c.outcome == outcome)


def _node_id(case: ET.Element) -> str:
    """`tests/x/test_y.py::test_z[param]` from classname `tests.x.test_y` and name."""
    classname, name = case.get("classname", ""), case.get("name", "?")
    parts = classname.split(".")
    # A test class's name is the last part when it starts with an upper-case letter.
    klass = parts.pop() if parts and parts[-1][:1].isupper() else None
    path = "/".join(parts) + ".py" if parts else "?"
    return "::".join(p for p in (path, klass, name) if p)


def _outcome(case: ET.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    if case.find("skipped") is not None:
        return "skipped"
    return "passed"


def read_suite(name: str, report: Path) -> Suite:
    """The suite in `report`; an empty suite marked not found when the file is missing."""
    if not report.is_file():
        return Suite(name, found=False)
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    suite = Suite(name, seconds=sum(float(s.get("time", "0") or 0) for s in suites))
    for s in suites:
        for case in s.iter("testcase"):
            seconds = float(case.get("time", "0") or 0)
            suite.cases.append(Case(_node_id(case), seconds, _outcome(case)))
    return suite


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def render(suites: list[Suite], slowest: int = 15) -> str:
    """The table of suites, a total line, then the `slowest` tests of all suites."""
    header = f"{'suite':<22} {'passed':>7} {'failed':>7} {'skipped':>8} {'time':>9}"
    lines = ["Test suites", header, "-" * len(header)]
    totals = [0, 0, 0]
    for s in suites:
        if not s.found:
            lines.append(f"{s.name:<22} {'no report':>24}")
            continue
        counts = [s.count("passed"), s.count("failed"), s.count("skipped")]
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        passed, failed, skipped = counts
        lines.append(f"{s.name:<22} {passed:>7} {failed:>7} {skipped:>8} {_minutes(s.seconds):>9}")
    total_time = sum(s.seconds for s in suites)
    lines.append("-" * len(header))
    lines.append(
        f"{'all':<22} {totals[0]:>7} {totals[1]:>7} {totals[2]:>8} {_minutes(total_time):>9}"
    )
    cases = sorted(
        ((c, s.name) for s in suites for c in s.cases), key=lambda x: x[0].seconds, reverse=True
    )[:slowest]
    lines += ["", f"The {len(cases)} slowest tests"]
    for case, suite in cases:
        lines.append(f"{case.seconds:8.1f} s  {suite:<20} {case.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, help="directory of <suite>.xml reports")
    parser.add_argument(
        "--suites",
        help="comma-separated suite names in the order shown (default: every report, by name)",
    )
    parser.add_argument("--slowest", type=int, default=15, help="how many slowest tests (15)")
    args = parser.parse_args(argv)
    if args.suites:
        names = [n for n in args.suites.split(",") if n]
    else:
        names = sorted(p.stem for p in args.reports.glob("*.xml"))
    suites = [read_suite(n, args.reports / f"{n}.xml") for n in names]
    print(render(suites, args.slowest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
