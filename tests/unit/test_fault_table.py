"""scripts/fault_table.py: the fault suite's results as the docs' table, the latest run of each
fault and mode."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fault_table.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fault_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fault_table"] = module
    spec.loader.exec_module(module)
    return module


fault_table = _load()


def _row(test: str, mode: str, acknowledged: int, ok: bool = True) -> dict[str, object]:
    return {"fault": test, "mode": mode, "acknowledged": acknowledged, "lost": 0, "ok": ok}


def test_each_fault_and_mode_shows_its_latest_run_in_first_seen_order(tmp_path: Path) -> None:
    rows = [
        _row("test-target-leader-killed-aaaaaa", "exactly-once", 100, ok=False),
        _row("test-target-leader-killed-aaaaaa", "at-least-once", 101),
        _row("test-link-cut-bbbbbb", "exactly-once", 50),
        _row("test-target-leader-killed-cccccc", "exactly-once", 200),  # a later run
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = tmp_path / "page.md"
    page.write_text(f"before\n{fault_table.START}\nold\n{fault_table.END}\nafter\n")
    sys.argv = ["fault_table.py", str(results), "--docs", str(page)]
    fault_table.main()
    lines = page.read_text().splitlines()
    body = lines[lines.index(fault_table.START) + 3 : lines.index(fault_table.END)]
    assert [line.split(" | ")[:3] for line in body] == [
        ["| target leader killed", "exactly-once", "200"],
        ["| target leader killed", "at-least-once", "101"],
        ["| link cut", "exactly-once", "50"],
    ]
    assert "**FAIL**" not in page.read_text()
    assert lines[0] == "before" and lines[-1] == "after"


def test_a_truncated_test_name_loses_its_trailing_dash() -> None:
    assert fault_table.fault_name("test-switchover-killed-after-fence-resumes--a0cc16") == (
        "switchover killed after fence resumes"
    )
