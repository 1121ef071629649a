"""`make chaos`: the fault test in exactly-once mode, then in at-least-once mode.

Writes bench/results/chaos.json and chaos.md and prints the table. Exits 1 unless exactly-once
lost, duplicated and reordered nothing and at-least-once lost nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.chaos.harness import FULL_SCHEDULE, ChaosReport, ChaosSettings, markdown, run_chaos

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", default="exactly-once,at-least-once")
    parser.add_argument("--rate", type=float, default=2000.0, help="records/s into A")
    parser.add_argument("--min-records", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    reports: list[ChaosReport] = []
    for mode in args.modes.split(","):
        settings = ChaosSettings(
            mode=mode,
            schedule=FULL_SCHEDULE,
            rate=args.rate,
            min_records=args.min_records,
            seed=args.seed,
        )
        print(f"== {mode}: {len(settings.schedule)} faults, {args.rate:.0f} records/s", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"ferry-chaos-{mode}-") as work:
            reports.append(run_chaos(settings, Path(work), lambda m: print(m, flush=True)))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "chaos.json").write_text(
        json.dumps([r.as_json() for r in reports], indent=2) + "\n"
    )
    table = markdown(reports)
    (args.results / "chaos.md").write_text(table)
    print(table)
    ok = all(
        r.lost == 0 and (r.mode != "exactly-once" or (r.duplicated == 0 and r.reordered == 0))
        for r in reports
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
