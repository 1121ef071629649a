"""A partition held by a schema registry that does not answer, as `ferry status` and the API
tell it: from the running lease's latest report on that partition."""

from __future__ import annotations

from pathlib import Path

from ferry.api.views import partition_rows
from ferry.engine.copy.lease import LeaseTerms, run_lease
from ferry.engine.copy.types import OPEN, CopyRange, PartitionResult, Slice
from ferry.engine.executors import TaskReport, held_partitions
from ferry.engine.flow_state import FlowState, partition_entry

WHY = "cluster B (http://registry-b:8081) schema registry did not answer: ... partition 1 ..."


def _report(began: float, *entries: dict[str, object]) -> TaskReport:
    return TaskReport("1", "node-1", began, list(entries))


def test_the_latest_report_on_a_partition_says_whether_it_holds() -> None:
    earlier = _report(10.0, {"topic": "t", "partition": 1, "held": WHY})
    later = _report(20.0, {"topic": "t", "partition": 1}, {"topic": "t", "partition": 2})
    assert held_partitions([earlier]) == {("t", 1): WHY}
    assert held_partitions([earlier, later]) == {}  # the retry copies again
    assert held_partitions([later, earlier]) == {}
    assert held_partitions([]) == {}


def test_a_lease_reports_the_hold_of_its_latest_slice_only() -> None:
    ranges = [CopyRange("t", 1, 5, OPEN, "A.t", 1_000_000)]
    slices = iter([WHY, ""])  # the registry answers again in the second slice
    reported: list[list[dict[str, object]]] = []

    def copy_slice(work: list[CopyRange], _slice: Slice) -> list[PartitionResult]:
        why = next(slices, "")
        moved = 0 if why else 3
        return [
            PartitionResult("t", 1, r.start, r.start + moved, copied=moved, held=why) for r in work
        ]

    calls = iter([False, False, True])
    terms = LeaseTerms(
        60.0,
        0.01,
        lambda: next(calls, True),
        lambda rs: reported.append([partition_entry(r) for r in rs]),  # as the task writes it
    )
    run_lease(ranges, {("t", 1): 5}, terms, copy_slice, lambda _results: None)

    holds = [[entry.get("held") for entry in entries] for entries in reported]
    assert holds[0] == [WHY] and holds[-1] == [None]


def test_the_api_rows_name_the_held_partition(tmp_path: Path) -> None:
    state = FlowState(tmp_path / "A-to-B")
    state.write_latest({"t:1": 9, "t:2": 9})
    state.write_live(
        "0-0-a",
        [
            partition_entry(PartitionResult("t", 1, 5, 5, held=WHY)),
            partition_entry(PartitionResult("t", 2, 5, 9)),
        ],
        {"id": "1", "host": "node-1"},
        1.0,
    )
    rows = {r["partition"]: r["held"] for r in partition_rows(state)}
    assert rows == {1: WHY, 2: None}
