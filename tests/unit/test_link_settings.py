"""A source across a wide-area link is read with the WAN consumer settings the user left unset."""

from __future__ import annotations

import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine import runner as runner_module
from ferry.engine.link_settings import WAN_CONSUMER, WAN_ROUND_TRIP_MS, wan_consumer_settings
from ferry.engine.runner import Runner


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
