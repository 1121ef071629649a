"""A source across a wide-area link is read with the WAN consumer settings the user left unset."""

from __future__ import annotations

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine import runner as runner_module
from ferry.engine.link_settings import (
    WAN_CONSUMER,
    WAN_ROUND_TRIP_MS,
    wan_consumer_settings,
    wan_task_slots,
)
from ferry.engine.runner import Runner
from ferry.engine.spark import session as session_module
from ferry.engine.spark.session import spark_master


def test_a_near_source_keeps_ferrys_defaults() -> None:
    assert wan_consumer_settings(0.4, {}) == {}
    assert wan_consumer_settings(WAN_ROUND_TRIP_MS - 0.1, {}) == {}


def test_a_source_that_did_not_answer_the_probe_keeps_them_too() -> None:
    assert wan_consumer_settings(None, {}) == {}


def test_a_far_source_gets_the_wan_settings() -> None:
    settings = wan_consumer_settings(60.0, {"bootstrap.servers": "a:9092"})
    assert settings == WAN_CONSUMER
    assert settings["socket.receive.buffer.bytes"] == "0"  # the OS's autotuning
    assert int(settings["max.partition.fetch.bytes"]) >= 4 * 1024 * 1024


def test_what_the_user_set_is_never_replaced() -> None:
    user = {"socket.receive.buffer.bytes": "8388608", "bootstrap.servers": "a:9092"}
    settings = wan_consumer_settings(60.0, user)
    assert "socket.receive.buffer.bytes" not in settings
    assert settings["max.partition.fetch.bytes"] == "4194304"


def _config(consumer: dict[str, str]) -> FerryConfig:
    clusters = {
        "A": ClusterConfig(alias="A", bootstrap_servers="a:9092", consumer=consumer),
        "B": ClusterConfig(alias="B", bootstrap_servers="b:9092"),
    }
    return FerryConfig(clusters=clusters, flows=(FlowConfig(source="A", target="B", enabled=True),))


@pytest.mark.parametrize(("measured", "expected"), [(60.0, WAN_CONSUMER), (0.5, {}), (None, {})])
def test_ferry_run_reads_a_far_source_with_the_wan_settings_and_says_so(
    monkeypatch: pytest.MonkeyPatch, measured: float | None, expected: dict[str, str]
) -> None:
    asked: list[str] = []

    def round_trip(settings: dict[str, str], timeout: float) -> float | None:
        asked.append(settings["bootstrap.servers"])
        return measured

    monkeypatch.setattr(runner_module, "round_trip_ms", round_trip)
    notices: list[str] = []
    runner = Runner(_config({"fetch.wait.max.ms": "100"}), on_notice=notices.append)
    runner._fit_links()
    consumer = runner.config.clusters["A"].consumer
    assert asked == ["a:9092"], "only the sources are measured"
    assert consumer == {"fetch.wait.max.ms": "100", **expected}
    assert runner.config.clusters["B"].consumer == {}
    if expected:
        assert notices and "cluster A is 60 ms away" in notices[0]
        assert "socket.receive.buffer.bytes = 0" in notices[0]
    else:
        assert not notices


def test_far_sources_get_a_few_task_slots_per_core_never_fewer_than_the_cores() -> None:
    assert wan_task_slots(2) == 8
    for cores in (1, 2, 3, 8, 16, 64, 256):
        slots = wan_task_slots(cores)
        assert slots >= cores
        assert slots <= max(cores, 4 * cores)
    assert wan_task_slots(256) == 256  # a big machine already has short answers per task


def _run_fitted(
    monkeypatch: pytest.MonkeyPatch, measured: float | None, spark: dict[str, str]
) -> tuple[Runner, list[str]]:
    monkeypatch.setattr(runner_module, "round_trip_ms", lambda settings, timeout: measured)
    monkeypatch.setattr(runner_module.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(session_module, "submitted_settings", dict)
    config = _config({}).model_copy(update={"spark": spark})
    notices: list[str] = []
    runner = Runner(config, on_notice=notices.append)
    runner._fit_links()
    return runner, notices


def test_a_far_source_is_copied_by_more_local_tasks_than_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner, notices = _run_fitted(monkeypatch, 60.0, {})
    assert runner.config.spark["spark.master"] == "local[8,4]"
    assert spark_master(runner.config) == "local[8,4]"
    assert any("8 Spark tasks on 2 cores" in n and "set spark.master" in n for n in notices)


@pytest.mark.parametrize(
    ("measured", "spark_settings"),
    [
        (0.5, {}),  # near: ferry's default master
        (None, {}),  # not measured
        (60.0, {"spark.master": "local[2]"}),  # the user's choice stands
        (60.0, {"spark.master": "spark://127.0.0.1:7077"}),
    ],
)
def test_a_near_source_or_a_chosen_master_keeps_its_task_slots(
    monkeypatch: pytest.MonkeyPatch, measured: float | None, spark_settings: dict[str, str]
) -> None:
    runner, notices = _run_fitted(monkeypatch, measured, spark_settings)
    assert runner.config.spark == spark_settings
    assert not any("Spark tasks" in n for n in notices)


def test_a_master_given_to_spark_submit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "round_trip_ms", lambda settings, timeout: 60.0)
    monkeypatch.setattr(runner_module.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(session_module, "submitted_settings", lambda: {"spark.master": "local[3]"})
    runner = Runner(_config({}), on_notice=lambda line: None)
    runner._fit_links()
    assert "spark.master" not in runner.config.spark
    assert spark_master(runner.config) == "local[3]"
