"""bench.partitions' helpers: merging shapes run apart into one report, MM2's refusal, the logs
of a failed shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.partitions import keep_logs, markdown, merged, refused_line


def _run(replicator: str, topics: int, partitions: int, seconds: float | None) -> dict[str, Any]:
    return {
        "replicator": replicator,
        "topics": topics,
        "partitions": partitions,
        "total_partitions": topics * partitions,
        "seconds": seconds,
    }


def _invocation(shapes: str) -> dict[str, Any]:
    return {"command": "python -m bench.partitions", "shapes": shapes, "date": "d", "seconds": 60}


def test_a_merged_run_replaces_its_shapes_and_keeps_the_others_in_order_of_size() -> None:
    earlier = merged(
        {},
        [_run("ferry", 100, 10, 20.0), _run("ferry", 1000, 10, 50.0), _run("mm2", 1000, 10, None)],
        _invocation("100 x 10, 1000 x 10"),
        {"records_per_topic": 3},
        "d",
        {"cpu_count": 2, "kafka": "4.1.1"},
    )
    report = merged(
        earlier,
        [_run("mm2", 100, 100, None), _run("ferry", 100, 100, 40.0), _run("ferry", 100, 10, 19.0)],
        _invocation("100 x 100, 100 x 10"),
        {"records_per_topic": 3, "mm2_tasks": 2},
        "d",
        {"cpu_count": 2, "kafka": "4.1.1"},
    )
    assert [
        (r["replicator"], r["topics"], r["partitions"], r["seconds"]) for r in report["runs"]
    ] == [
        ("ferry", 100, 10, 19.0),
        ("ferry", 100, 100, 40.0),
        ("mm2", 100, 100, None),
        ("ferry", 1000, 10, 50.0),
        ("mm2", 1000, 10, None),
    ]
    assert [i["shapes"] for i in report["invocations"]] == [
        "100 x 10, 1000 x 10",
        "100 x 100, 100 x 10",
    ]
    table = markdown(report)
    assert "| 100 x 100 | 10,000 | ferry | 40.0 |" in table
    assert "`python -m bench.partitions` (100 x 100, 100 x 10)" in table


def test_a_run_of_every_shape_again_keeps_no_earlier_invocation() -> None:
    earlier = merged({}, [_run("ferry", 100, 10, 20.0)], _invocation("a"), {}, "d", {})
    report = merged(earlier, [_run("ferry", 100, 10, 21.0)], _invocation("b"), {}, "d", {})
    assert [i["shapes"] for i in report["invocations"]] == ["b"]


def test_mm2_refused_by_the_controller_is_found_in_its_log(tmp_path: Path) -> None:
    log = tmp_path / "mm2.log"
    assert refused_line(log) is None
    log.write_text(
        "[2026-11-26 12:00:00,000] INFO Started\n"
        "[2026-11-26 12:00:05,000] WARN Could not create topics: "
        "org.apache.kafka.common.errors.PolicyViolationException: Excessively large number of "
        "partitions per request.\n"
    )
    line = refused_line(log)
    assert line is not None and line.startswith("[2026-11-26 12:00:05,000] WARN Could not")


def test_a_failed_shape_keeps_its_process_logs_not_its_data(tmp_path: Path) -> None:
    shape = tmp_path / "shape"
    segment = shape / "clusters" / "A" / "data" / "p-0001-0" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"records")
    (shape / "clusters" / "A" / "server.log").write_text("ERROR Too many open files\n")
    (shape / "ferry-p" / "ferry.err").parent.mkdir(parents=True)
    (shape / "ferry-p" / "ferry.err").write_text("Traceback\n")
    kept = keep_logs(shape, tmp_path / "kept")
    files = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file())
    assert files == ["clusters/A/server.log", "ferry-p/ferry.err"]
    assert (kept / "clusters/A/server.log").read_text() == "ERROR Too many open files\n"
