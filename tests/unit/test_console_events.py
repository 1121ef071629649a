"""What the console shows of ferry run's lines: newest first, bounded, secrets masked."""

from __future__ import annotations

from ferry import secrets
from ferry.api.events import Events


def test_lines_come_back_newest_first_and_only_the_last_ones_are_kept() -> None:
    events = Events(capacity=3)
    for i in range(5):
        events.add(f"line {i}")
    assert [e["message"] for e in events.recent()] == ["line 4", "line 3", "line 2"]


def test_a_secret_quoted_in_a_line_is_masked_as_on_the_terminal() -> None:
    secrets.register("hunter2-console")
    events = Events()
    events.add("cluster A refused: password hunter2-console is wrong")
    assert "hunter2-console" not in events.recent()[0]["message"]
    assert events.recent()[0]["message"].startswith("cluster A refused: password ")
