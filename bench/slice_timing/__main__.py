"""Summarise a FERRY_SLICE_TIMING file: per step, how many, p50 / p90 / p99 / max in ms.

    FERRY_SLICE_TIMING=/tmp/slices.log PYTHONPATH=bench/slice_timing \
        .venv/bin/python -m bench.exactly_once_consumer --runs ferry-eos
    .venv/bin/python -m bench.slice_timing /tmp/slices.log [--out FILE.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.stats import percentile

STEPS = {
    "copy": "a slice's copy, until every copy is acknowledged",
    "wait": "the slice waiting for the previous slice's commit",
    "commit": "one slice's commit, all of its partitions at once",
    "offsets": "a partition's position added to its transaction (AddOffsetsToTxn, TxnOffsetCommit)",
    "end": "a partition's commit_transaction (offset-run record flushed, EndTxn)",
}


def summary(path: Path) -> str:
    seconds: dict[str, list[float]] = {step: [] for step in STEPS}
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in seconds:
            seconds[fields[2]].append(float(fields[3]) * 1000)
    rows = ["| step | n | p50 | p90 | p99 | max |", "|---|---:|---:|---:|---:|---:|"]
    for step, what in STEPS.items():
        values = sorted(seconds[step])
        if not values:
            continue
        figures = [percentile(values, q) for q in (0.5, 0.9, 0.99)] + [values[-1]]
        cells = " | ".join(f"{v:,.0f}" for v in figures)
        rows.append(f"| `{step}`: {what} | {len(values):,} | {cells} |")
    return "\n".join(rows) + "\n\nMilliseconds.\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("timing", type=Path, help="the FERRY_SLICE_TIMING file")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    table = summary(args.timing)
    print(table, end="")
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()
