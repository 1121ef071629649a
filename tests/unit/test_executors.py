"""Which executor copies what: per-executor partitions, rates and totals from task reports."""

from __future__ import annotations

from pathlib import Path

from ferry.engine.executors import TaskReport, add_totals, summarize
from ferry.engine.flow_state import FlowState, LeaseBounds
from ferry.engine.spark.executor_identity import executor_of


def _task(executor: str, began: float, **copied: int) -> TaskReport:
    partitions = [
        {
            "topic": key.split("_")[0],
            "partition": int(key.split("_")[1]),
            "copied": n,
            "bytes": n * 10,
        }
        for key, n in copied.items()
    ]
    return TaskReport(executor, f"host-{executor}", began, partitions)


def test_running_tasks_give_each_executor_its_partitions_and_rate() -> None:
    running = [
        _task("1", 100.0, orders_0=500, orders_1=300),
        _task("2", 100.0, orders_2=100),
        _task("1", 104.0, payments_0=600),  # a second core of executor 1
    ]
    stats = summarize(running, {}, now=110.0)
    assert list(stats) == ["1", "2"]
    one = stats["1"]
    assert one.partitions == ["orders:0", "orders:1", "payments:0"]
    assert one.records == 1400 and one.bytes == 14000
    assert one.records_per_second == 800 / 10 + 600 / 6  # its two tasks' rates add up
    assert stats["2"].records_per_second == 10.0
    assert stats["2"].host == "host-2"


def test_totals_keep_what_ended_leases_copied_and_idle_executors_stay_listed() -> None:
    totals: dict = {}
    add_totals(totals, [_task("1", 1.0, orders_0=50), _task("2", 1.0, orders_1=70)])
    add_totals(totals, [_task("1", 9.0, orders_0=5)])
    stats = summarize([_task("1", 20.0, orders_0=10)], totals, now=30.0)
    assert stats["1"].records == 65
    assert stats["2"].records == 70, "an executor with no running task keeps its total"
    assert stats["2"].partitions == [] and stats["2"].records_per_second == 0.0


def test_a_report_without_an_executor_is_unknown_not_dropped() -> None:
    task = TaskReport.from_json({"partitions": [{"topic": "t", "partition": 0, "copied": 3}]})
    stats = summarize([task], {}, now=5.0)
    assert stats["unknown"].records == 3
    assert stats["unknown"].records_per_second == 0.0, "no start known: no rate invented"


def test_the_executor_is_read_off_its_jvm_command_line() -> None:
    standalone = [
        "java",
        "-cp",
        "x",
        "org.apache.spark.executor.CoarseGrainedExecutorBackend",
        "--driver-url",
        "spark://x",
        "--executor-id",
        "3",
        "--hostname",
        "h",
    ]
    assert executor_of(standalone) == "3"
    assert executor_of(["java", "org.apache.spark.deploy.SparkSubmit", "pyspark-shell"]) == "driver"
    assert executor_of(["python", "-m", "pyspark.daemon"]) is None


def test_flow_state_counts_an_ended_lease_per_executor_once(tmp_path: Path) -> None:
    state = FlowState(tmp_path)
    entry = {
        "topic": "orders",
        "partition": 0,
        "end": 10,
        "copied": 10,
        "skipped": 0,
        "bytes": 100,
        "expired": 0,
    }
    state.write_live("0-0-a", [entry], {"id": "1", "host": "h1"}, began=1.0)
    state.write_live("1-0-b", [{**entry, "partition": 1}], {"id": "2", "host": "h2"}, began=1.0)
    running = state.executors(now=11.0)
    assert running["1"].partitions == ["orders:0"] and running["1"].records_per_second == 1.0
    state.absorb_leases(0, 10.0, ["python"], LeaseBounds("run", 1.0, 11.0))
    ended = state.executors(now=20.0)
    assert (ended["1"].records, ended["2"].records) == (10, 10)
    assert ended["1"].partitions == [], "the lease is over: nothing copied there now"
    state.write_live("0-0-c", [{**entry, "copied": 4}], {"id": "1", "host": "h1"}, began=21.0)
    assert state.executors(now=22.0)["1"].records == 14
