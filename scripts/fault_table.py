"""The fault suite's results (artifacts/faults/results.jsonl, one line per fault and delivery
mode, appended by every run) as a markdown table, written between the markers of the docs page
that shows it. Each fault and mode shows its latest run, so the extended faults' own run and
the CI subset's make one table.

    .venv/bin/python scripts/fault_table.py [RESULTS] [--docs docs/operations/guarantees.md]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

START, END = "<!-- fault-table:start -->", "<!-- fault-table:end -->"
COLUMNS = (
    ("fault", "fault"),
    ("mode", "mode"),
    ("acknowledged", "acknowledged"),
    ("lost", "lost"),
    ("duplicated", "duplicated"),
    ("out of order", "out_of_order"),
    ("aborted read", "aborted_read"),
    ("foreign", "foreign"),
    ("acked, not on source", "not_on_source"),
    ("caught up (s)", "recovery_seconds"),
    ("verdict", "ok"),
)


def fault_name(test_name: str) -> str:
    """`test-link-lost-for-a-minute-A-cut-1a2b3c` -> `link lost for a minute A cut`."""
    name = re.sub(r"-[0-9a-f]{6}$", "", test_name)
    return name.removeprefix("test-").replace("-", " ").strip()


def latest(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """The last row of each fault and mode, in the order each fault first appears."""
    kept: dict[tuple[str, object], dict[str, object]] = {}
    for row in rows:
        key = (fault_name(str(row["fault"])), row["mode"])
        kept[key] = row  # a key keeps its first place; the value is the last run's
    return list(kept.values())


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| " + " | ".join(title for title, _ in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for row in rows:
        cells = []
        for _, key in COLUMNS:
            value = row.get(key)
            if key == "fault":
                value = fault_name(str(value))
            elif key == "ok":
                value = "pass" if value else "**FAIL**"
            elif value is None:
                value = "–"  # a run from before the suite counted it
            elif isinstance(value, int):
                value = f"{value:,}"
            cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="artifacts/faults/results.jsonl")
    parser.add_argument("--docs", help="a page holding the table's markers, rewritten in place")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line]
    text = table(latest(rows))
    if not args.docs:
        print(text, end="")
        return
    page = Path(args.docs)
    before, start, rest = page.read_text().partition(START)
    _, end, after = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{page} has no {START} ... {END} markers")
    page.write_text(f"{before}{START}\n{text}{END}{after}")


if __name__ == "__main__":
    main()
