"""The control API over HTTP (FastAPI's test client), its controller against a state dir, and
the token rules; no broker: the source's topics come from a stand-in."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ferry.api.app import create_app
from ferry.api.auth import TOKEN_ENV, check_open, load_token
from ferry.api.history import History, Sample
from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.control.controller import Controller
from ferry.engine.flow_state import FlowState
from ferry.errors import ConfigError, KafkaUnavailableError
from ferry.flows.override import FlowControl
from ferry.flows.status import Condition

TOKEN = "t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ON_SOURCE = {"orders", "payments", "B.orders", "__consumer_offsets"}


def _config(tmp_path: Path, more: str = "") -> FerryConfig:
    path = tmp_path / "ferry.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
        f"A->B.enabled = true\ntopics = orders\nferry.state.dir = {tmp_path / 'state'}\n{more}"
    )
    return load_config(path)


class Setup:
    def __init__(self, tmp_path: Path, token: str | None = TOKEN) -> None:
        self.notices: list[str] = []
        self.failovers: list[tuple[Any, ...]] = []
        self.config = _config(tmp_path)
        self.controller = Controller(
            self.config, self.notices.append, topics=lambda _c, _f: set(ON_SOURCE)
        )
        self.state = FlowState(tmp_path / "state" / "A-to-B")

        def failover(*args: Any) -> dict[str, Any]:
            self.failovers.append(args)
            return {"group": args[0], "positions": []}

        self.condition = Condition()  # what the runner knows of A->B
        self.restarts: list[str] = []

        def restart(name: str) -> bool:
            if self.condition.failed is None:
                return False
            self.restarts.append(name)
            self.condition = Condition()
            return True

        self.history = History()
        self.alerts: list[dict[str, Any]] = []
        app = create_app(
            self.controller,
            token=token,
            conditions=lambda: {"A->B": self.condition},
            failover=failover,
            restart=restart,
            history=self.history,
            alerts=lambda: self.alerts,
        )
        self.client = TestClient(app)


@pytest.fixture
def api(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_calls_without_the_token_or_with_a_wrong_one_get_401(api: Setup) -> None:
    assert api.client.get("/api/v1/flows").status_code == 401
    wrong = api.client.post("/api/v1/flows/A/B/pause", headers={"Authorization": "Bearer x"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert api.state.control() == FlowControl(), "a refused call changed the flow"
    assert api.client.get("/api/v1/flows", headers=AUTH).status_code == 200
    assert "/api/v1/failover" in api.client.get("/openapi.json").json()["paths"]


def test_without_a_token_configured_the_api_is_open(tmp_path: Path) -> None:
    open_api = Setup(tmp_path, token=None)
    assert open_api.client.get("/api/v1/flows").status_code == 200


def test_a_topic_added_is_recorded_for_the_planner_and_said_once(api: Setup) -> None:
    answer = api.client.post("/api/v1/flows/A/B/topics", json={"topic": "payments"}, headers=AUTH)
    assert answer.status_code == 200
    assert answer.json() == {"added": ["payments"], "removed": [], "paused": False}
    assert api.state.control().added == {"payments"}
    assert api.state.replan_marker.exists(), "the running lease must end for the change"
    api.state.replan_marker.unlink()
    again = api.client.post("/api/v1/flows/A/B/topics", json={"topic": "payments"}, headers=AUTH)
    assert again.status_code == 200
    assert not api.state.replan_marker.exists(), "a change that changes nothing replanned"
    assert api.notices == ["flow A->B: topic payments added over the API"]


def test_refusals_name_the_reason(api: Setup) -> None:
    def add(flow: str, topic: str) -> Any:
        return api.client.post(f"/api/v1/flows/{flow}/topics", json={"topic": topic}, headers=AUTH)

    unknown = add("B/A", "orders")
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == "no running flow B->A (running: A->B)"
    missing = add("A/B", "refunds")
    assert missing.status_code == 400
    assert "topic refunds does not exist on A (127.0.0.1:1)" in missing.json()["detail"]
    internal = add("A/B", "__consumer_offsets")
    assert internal.status_code == 400 and "internal" in internal.json()["detail"]
    cycle = add("A/B", "B.orders")
    assert cycle.status_code == 400 and "came from B" in cycle.json()["detail"]
    not_copied = api.client.delete("/api/v1/flows/A/B/topics/payments", headers=AUTH)
    assert not_copied.status_code == 400
    assert not_copied.json()["detail"] == "flow A->B does not copy topic payments"
    heartbeats = api.client.delete("/api/v1/flows/A/B/topics/heartbeats", headers=AUTH)
    assert heartbeats.status_code == 400
    assert add("A/B", "").status_code == 422
    assert api.state.control() == FlowControl()
    assert api.notices == []


def test_remove_pause_and_resume_change_the_flow_and_its_view(api: Setup) -> None:
    removed = api.client.delete("/api/v1/flows/A/B/topics/orders", headers=AUTH)
    assert removed.json() == {"added": [], "removed": ["orders"], "paused": False}
    assert api.client.post("/api/v1/flows/A/B/pause", headers=AUTH).json()["paused"] is True
    flows = api.client.get("/api/v1/flows", headers=AUTH).json()
    assert [(f["name"], f["state"]) for f in flows] == [("A->B", "paused")]
    assert api.state.control() == FlowControl(removed=frozenset({"orders"}), paused=True)
    assert api.client.post("/api/v1/flows/A/B/resume", headers=AUTH).json()["paused"] is False
    one = api.client.get("/api/v1/flows/A/B", headers=AUTH).json()
    assert one["state"] == "running" and one["partitions"] == []
    assert api.notices == [
        "flow A->B: topic orders removed (its copy stays) over the API",
        "flow A->B: paused over the API",
        "flow A->B: resumed over the API",
    ]


def test_the_view_reports_lag_per_partition_from_the_flow_state(api: Setup) -> None:
    api.state.write_latest({"orders:0": 120, "orders:1": 40})
    api.state.add_batch(
        1,
        [
            {
                "topic": "orders",
                "partition": 0,
                "end": 100,
                "copied": 100,
                "skipped": 0,
                "bytes": 1000,
            },
        ],
        0.1,
    )
    one = api.client.get("/api/v1/flows/A/B", headers=AUTH).json()
    assert one["lag"] == 20 + 40
    assert one["topics"] == ["orders"]
    assert one["partitions"] == [
        {"topic": "orders", "partition": 0, "end": 120, "position": 100, "lag": 20, "records": 100}
        | {"rpo_seconds": None, "held": None},  # not measured: unknown, never 0; not held
        {"topic": "orders", "partition": 1, "end": 40, "position": None, "lag": 40, "records": 0}
        | {"rpo_seconds": None, "held": None},
    ]


def test_failover_passes_the_request_through_and_an_unreachable_cluster_is_503(
    api: Setup,
) -> None:
    body = {"group": "g", "from": "A", "to": "B", "dry_run": True}
    answer = api.client.post("/api/v1/failover", json=body, headers=AUTH)
    assert answer.status_code == 200 and answer.json()["group"] == "g"
    assert api.failovers == [("g", "A", "B", True, False)]

    def down(*_args: Any) -> dict[str, Any]:
        raise KafkaUnavailableError("A", "127.0.0.1:1", "connection refused")

    client = TestClient(create_app(api.controller, token=None, failover=down))
    refused = client.post("/api/v1/failover", json=body)
    assert refused.status_code == 503 and "127.0.0.1:1" in refused.json()["detail"]


def test_no_token_means_loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    config = _config(tmp_path)
    assert load_token(config) is None
    check_open("127.0.0.1", None)
    check_open("::1", None)
    with pytest.raises(ConfigError, match=re.escape("would listen on 0.0.0.0 with no token")):
        check_open("0.0.0.0", None)
    check_open("0.0.0.0", "secret")


def test_the_token_comes_from_the_environment_first_then_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    (tmp_path / "token").write_text("from-file\n")
    config = _config(tmp_path, "api.token.file = token\n")
    assert load_token(config) == "from-file"
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert load_token(config) == "from-env"
    monkeypatch.delenv(TOKEN_ENV)
    (tmp_path / "token").write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        load_token(config)


def test_api_keys_are_checked_on_load(tmp_path: Path) -> None:
    config = _config(tmp_path, "api.control.cluster = B\napi.control.topic = ctl.internal\n")
    assert config.api.control_cluster == "B" and config.api.control_topic == "ctl.internal"
    with pytest.raises(ConfigError, match="names cluster 'C'"):
        _config(tmp_path, "api.control.cluster = C\n")
    with pytest.raises(ConfigError, match=re.escape("needs api.ssl.keyfile too")):
        _config(tmp_path, "api.ssl.certfile = cert.pem\n")
    with pytest.raises(ConfigError, match=re.escape("did you mean 'api.token.file'")):
        _config(tmp_path, "api.token.fil = x\n")


def test_a_failed_flow_says_failed_with_its_error_and_restarts_on_request(api: Setup) -> None:
    error = "topic orders on A: TOPIC_AUTHORIZATION_FAILED: not allowed to read"
    api.condition = Condition(failed=error)
    listed = api.client.get("/api/v1/flows", headers=AUTH).json()
    assert [(f["name"], f["state"], f["error"]) for f in listed] == [("A->B", "failed", error)]
    one = api.client.get("/api/v1/flows/A/B", headers=AUTH).json()
    assert (one["state"], one["error"]) == ("failed", error)
    restarted = api.client.post("/api/v1/flows/A/B/restart", headers=AUTH)
    assert restarted.status_code == 200
    assert (restarted.json()["state"], restarted.json()["error"]) == ("running", None)
    assert api.restarts == ["A->B"]
    again = api.client.post("/api/v1/flows/A/B/restart", headers=AUTH)
    assert again.status_code == 400
    assert again.json()["detail"] == "flow A->B has not failed; only a failed flow restarts"
    assert api.client.post("/api/v1/flows/B/A/restart", headers=AUTH).status_code == 404


def test_the_console_page_is_open_but_its_data_needs_the_token(api: Setup) -> None:
    page = api.client.get("/")
    assert page.status_code == 200 and "console/console.js" in page.text
    script = api.client.get("/console/console.js")
    assert script.status_code == 200 and "Authorization" in script.text
    assert api.client.get("/api/v1/flows/A/B/history").status_code == 401
    assert api.client.get("/api/v1/events").status_code == 401
    assert api.client.get("/api/v1/alerts").status_code == 401
    assert api.client.get("/console/../app.py").status_code == 404


def test_the_history_endpoint_answers_the_flows_last_hour(api: Setup) -> None:
    now = time.time()
    api.history.add("A->B", Sample(now - 7200, 90, 0, 0, 0.0, 0))  # two hours ago: left out
    api.history.add("A->B", Sample(now - 10, 50, 0, 0, 0.0, 0))
    api.history.add("A->B", Sample(now - 5, 10, 40, 4000, 400.0, 40))
    answer = api.client.get("/api/v1/flows/A/B/history", headers=AUTH).json()
    assert answer["interval_seconds"] == 5.0
    assert [(p["lag"], p["records_per_second"], p["latency_ms"]) for p in answer["points"]] == [
        (50, None, None),
        (10, 8.0, 10.0),
    ]


def test_the_alerts_endpoint_lists_the_series_in_sync_delay_now(api: Setup) -> None:
    assert api.client.get("/api/v1/alerts", headers=AUTH).json() == []
    alert = {"flow": "A->B", "kind": "latest", "topic": "orders", "partition": 0, "a_sub": 9}
    api.alerts.append(alert)
    assert api.client.get("/api/v1/alerts", headers=AUTH).json() == [alert]
