"""bench/slice_timing: the hook a copy process loads, and the summary of what it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.slice_timing.__main__ import summary

HOOK = Path(__file__).resolve().parents[2] / "bench" / "slice_timing"


def test_the_summary_gives_each_steps_percentiles_in_milliseconds(tmp_path: Path) -> None:
    timing = tmp_path / "slices.log"
    lines = [f"1 1.0 copy {s / 1000:.4f} 500" for s in range(1, 101)]  # 1..100 ms
    lines += ["1 1.0 end 0.0200", "1 1.0 end 0.0400", "not a line", "1 1.0 other 9.0"]
    timing.write_text("\n".join(lines) + "\n")
    text = summary(timing)
    copy_row = next(line for line in text.splitlines() if line.startswith("| `copy`"))
    assert copy_row.endswith("| 100 | 50 | 90 | 99 | 100 |")
    end_row = next(line for line in text.splitlines() if line.startswith("| `end`"))
    assert end_row.endswith("| 2 | 20 | 40 | 40 | 40 |")
    assert "`wait`" not in text, "a step with no lines gets no row"


def test_the_hook_times_a_commit_in_a_process_that_loads_it(tmp_path: Path) -> None:
    timing = tmp_path / "slices.log"
    script = (
        "from ferry.engine.copy.commit_pipeline import CommitPipeline\n"
        "pipeline = CommitPipeline()\n"
        "pipeline.submit(lambda: None)\n"
        "pipeline.wait()\n"
        "pipeline.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(HOOK), "FERRY_SLICE_TIMING": str(timing)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    steps = [line.split()[2] for line in timing.read_text().splitlines()]
    assert sorted(steps) == ["commit", "wait"]


def test_without_the_variable_nothing_is_patched(tmp_path: Path) -> None:
    script = "from ferry.engine.copy import exactly_once\nprint(exactly_once._commit.__name__)\n"
    env = {**os.environ, "PYTHONPATH": str(HOOK)}
    env.pop("FERRY_SLICE_TIMING", None)
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, check=True, timeout=60, capture_output=True
    )
    assert out.stdout.decode().strip() == "_commit"
