"""`ferry run --api-port`: topics added, removed, flows paused and resumed while it runs, over
the REST API, against real brokers; the changes outlive a restart (the control topic).

One `ferry run` (a subprocess, as an operator starts it) serves every test of the module; the
restart runs in this process on the session's Spark, so Spark starts once for the module.
Tests run in file order; each uses its own topics and leaves the flow running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferry.config import load_config
from ferry.control.controller import Controller
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner
from ferry.local.cluster import LocalCluster
from tests.integration.group_helpers import commit_group
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_all, record_count
from tests.integration.kafka_helpers import wait_for as _wait_for
from tests.integration.replication_setup import run_beside, write_config

pytestmark = pytest.mark.api  # its own Spark start: `make test-api`, not the default run

TOKEN = "s3cret-" + uuid.uuid4().hex


def wait_for(condition: Any, timeout: float, what: str, ferry: FerryRun | None = None) -> None:
    try:
        _wait_for(condition, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{ferry.diagnosis() if ferry else ''}") from None


@dataclass
class FerryRun:
    """A `ferry run --api-port 0` subprocess and a client of its API."""

    config: Path
    state: Path
    log: Path
    a: str
    b: str
    base: str  # the topic the config file selects
    config_topic: str  # the control topic on B
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    starts: int = 0
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=60))

    def start(self) -> None:
        address = self.state / "api.json"
        address.unlink(missing_ok=True)
        flow = FlowState(self.state / "A-to-B")
        (flow.directory / "lease.json").unlink(missing_ok=True)  # the last run's
        self.starts += 1
        command = [sys.executable, "-m", "ferry", "run", "-c", str(self.config), "--api-port", "0"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "FERRY_API_TOKEN": TOKEN}
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        wait_for(address.exists, 180, "ferry run serving its API", self)
        self.url = json.loads(address.read_text())["url"]
        # Serving is not copying: wait until the first lease was planned.
        wait_for(lambda: self.base in flow.lease_topics(), 180, "the first lease", self)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        assert self.proc.returncode == 0, self.log_tail()
        self.proc = None

    def call(self, method: str, path: str, token: str | None = TOKEN, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.http.request(method, f"{self.url}{path}", headers=headers, **kw)

    def ok(self, method: str, path: str, **kw: Any) -> Any:
        response = self.call(method, path, **kw)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`ferry <args> -c CONFIG`, with the token in its environment; must succeed."""
        result = subprocess.run(
            [sys.executable, "-m", "ferry", *args, "-c", str(self.config)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "FERRY_API_TOKEN": TOKEN, "COLUMNS": "200"},
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def log_tail(self, size: int = 4000) -> str:
        return self.log.read_text()[-size:] if self.log.exists() else ""

    def diagnosis(self) -> str:
        """The log's end, with every thread's stack of a ferry still running (SIGUSR1 makes
        it print them): what it was waiting for when a test gave up on it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)
            with contextlib.suppress(AssertionError):
                _wait_for(lambda: "most recent call first" in self.log_tail(), 10, "stacks")
            return self.log_tail(16000)
        return self.log_tail()


@pytest.fixture(scope="module")
def ferry(
    kafka_clusters: dict[str, LocalCluster], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FerryRun]:
    directory = tmp_path_factory.mktemp("control-api")
    prefix = f"api-{uuid.uuid4().hex[:8]}"
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    base = f"{prefix}-file"
    create_topic(a, base, 2)
    config = write_config(
        directory,
        kafka_clusters,
        topics=base,
        **{
            "ferry.lease.seconds": 300,  # longer than the module: changes act mid-lease
            "ferry.commit.interval.ms": 200,
            "refresh.topics.interval.seconds": 600,  # so a change is the API's doing
            "emit.checkpoints.enabled": "false",
            "sync.topic.configs.enabled": "false",
            "sync.topic.acls.enabled": "false",
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "api.control.cluster": "B",
            "api.control.topic": f"ferry-control-{prefix}.internal",
        },
    )
    run = FerryRun(
        config,
        directory / "state",
        directory / "ferry.log",
        a,
        b,
        base,
        f"ferry-control-{prefix}.internal",
    )
    try:
        run.start()
        yield run
    finally:
        if run.proc is not None:
            run.proc.kill()
            run.proc.wait(30)


def _records(count: int, tag: str, partitions: int = 1) -> list[Rec]:
    return [
        Rec(i % partitions, f"k{i}".encode(), f"{tag}-{i}".encode(), (("h", b"1"),), 0)
        for i in range(count)
    ]


def _values(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes | None]:
    return [r.value for r in read_all(bootstrap, topic, partitions, expected)]


def test_every_call_needs_the_token(ferry: FerryRun) -> None:
    assert ferry.call("GET", "/api/v1/flows", token=None).status_code == 401
    wrong = ferry.call("GET", "/api/v1/flows", token=TOKEN + "x")
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == "Bearer"
    assert ferry.call("POST", "/api/v1/flows/A/B/pause", token="nope").status_code == 401
    assert ferry.ok("GET", "/api/v1/flows/A/B")["state"] == "running", "a refused pause paused"
    flows = ferry.ok("GET", "/api/v1/flows")
    assert [f["name"] for f in flows] == ["A->B"]
    assert ferry.base in flows[0]["topics"]
    document = ferry.http.get(f"{ferry.url}/openapi.json").json()
    assert "/api/v1/flows/{source}/{target}/topics" in document["paths"]
    assert TOKEN not in ferry.log_tail(), "the token was printed"


def test_bad_changes_are_refused_with_a_reason(ferry: FerryRun, topic_name: str) -> None:
    unknown = ferry.call("POST", "/api/v1/flows/B/A/topics", json={"topic": ferry.base})
    assert unknown.status_code == 404
    assert "no running flow B->A" in unknown.json()["detail"]
    missing = ferry.call("POST", "/api/v1/flows/A/B/topics", json={"topic": topic_name})
    assert missing.status_code == 400
    assert f"topic {topic_name} does not exist on A" in missing.json()["detail"]
    internal = ferry.call("POST", "/api/v1/flows/A/B/topics", json={"topic": "__consumer_offsets"})
    assert internal.status_code == 400
    assert "internal" in internal.json()["detail"]


def test_a_topic_added_is_copied_exactly_and_once_removed_stops_growing(
    ferry: FerryRun, topic_name: str
) -> None:
    a, b = ferry.a, ferry.b
    extra, remote = f"{topic_name}-extra", f"A.{topic_name}-extra"
    create_topic(a, extra, 2)
    sent = _records(120, "first", partitions=2)
    produce(a, extra, sent)
    assert record_count(b, remote) == 0  # not selected by the file

    control = ferry.ok("POST", "/api/v1/flows/A/B/topics", json={"topic": extra})
    assert control == {"added": [extra], "removed": [], "paused": False}
    wait_for(lambda: record_count(b, remote) == 120, 120, f"{remote} copied", ferry)
    copied = read_all(b, remote, 2, 120)
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
        (r.partition, r.key, r.value) for r in sent
    )
    assert extra in ferry.ok("GET", "/api/v1/flows/A/B")["topics"]
    # A group on the added topic fails over like one on a topic the file names.
    group = f"{topic_name}-group"
    commit_group(a, group, {(extra, 0): 30, (extra, 1): 60})
    body = {"group": group, "from": "A", "to": "B", "dry_run": True}
    plan = ferry.ok("POST", "/api/v1/failover", json=body)
    assert plan["committed"] is False and plan["not_replicated"] == []
    assert sorted((p["target_topic"], p["partition"], p["offset"]) for p in plan["positions"]) == [
        (remote, 0, 30),
        (remote, 1, 60),
    ]

    control = ferry.ok("DELETE", f"/api/v1/flows/A/B/topics/{extra}")
    assert control == {"added": [], "removed": [extra], "paused": False}
    flow = FlowState(ferry.state / "A-to-B")
    wait_for(lambda: extra not in flow.lease_topics(), 120, "a lease without the topic", ferry)
    produce(a, extra, _records(30, "after-removal", partitions=2))
    # The flow still runs: what reaches its file topic after the removal is copied...
    before = record_count(b, f"A.{ferry.base}")
    produce(a, ferry.base, _records(10, f"{topic_name}-marker"))
    wait_for(
        lambda: record_count(b, f"A.{ferry.base}") == before + 10, 120, "the file topic", ferry
    )
    # ... and nothing of the removed one, whose copy keeps what it had.
    assert record_count(b, remote) == 120
    assert extra not in ferry.ok("GET", "/api/v1/flows/A/B")["topics"]


def test_pause_holds_the_position_and_resume_catches_up_with_nothing_lost(
    ferry: FerryRun, topic_name: str
) -> None:
    a, b = ferry.a, ferry.b
    topic, remote = f"{topic_name}-paused", f"A.{topic_name}-paused"
    create_topic(a, topic, 1)
    ferry.ok("POST", "/api/v1/flows/A/B/topics", json={"topic": topic})
    produce(a, topic, _records(50, "before"))
    wait_for(lambda: record_count(b, remote) == 50, 120, f"{remote} copied", ferry)

    flow = FlowState(ferry.state / "A-to-B")
    running = flow.stats().get("lease")
    # From the command line, which finds the API through the state dir.
    paused = ferry.cli("flows", "pause", "--flow", "A->B")
    assert paused.stdout.startswith("flow A->B: paused; added "), paused.stdout
    assert ferry.ok("GET", "/api/v1/flows/A/B")["state"] == "paused"
    # The running lease ends (its tasks see the replan marker) and no other is planned.
    wait_for(lambda: flow.stats().get("lease") != running, 120, "the lease ended", ferry)
    produce(a, topic, _records(200, "while-paused"))
    # The driver's watch sees the source grow (the lag) while nothing is copied.
    wait_for(
        lambda: _lag(ferry, topic) == 200, 60, "the lag of the paused flow reaching 200", ferry
    )
    assert record_count(b, remote) == 50

    assert ferry.cli("flows", "resume", "--flow", "A->B").stdout.startswith("flow A->B: running")
    assert topic in ferry.cli("topics", "list", "--flow", "A->B").stdout.splitlines()
    wait_for(lambda: record_count(b, remote) == 250, 120, "the paused records copied", ferry)
    values = _values(b, remote, 1, 250)
    assert values == [f"before-{i}".encode() for i in range(50)] + [
        f"while-paused-{i}".encode() for i in range(200)
    ]


def _lag(ferry: FerryRun, topic: str) -> int:
    partitions = ferry.ok("GET", "/api/v1/flows/A/B")["partitions"]
    return sum(p["lag"] or 0 for p in partitions if p["topic"] == topic)


def test_changes_survive_a_restart(ferry: FerryRun, topic_name: str, spark: Any) -> None:
    a, b = ferry.a, ferry.b
    kept, dropped = f"{topic_name}-kept", f"{topic_name}-dropped"
    for topic in (kept, dropped):
        create_topic(a, topic, 1)
        ferry.ok("POST", "/api/v1/flows/A/B/topics", json={"topic": topic})
        produce(a, topic, _records(20, "first"))
    for topic in (kept, dropped):
        remote = f"A.{topic}"
        wait_for(lambda r=remote: record_count(b, r) == 20, 120, f"{remote} copied", ferry)
    removed = ferry.cli("topics", "remove", "--flow", "A->B", dropped)
    assert dropped in removed.stdout.partition("; removed ")[2].strip().split(", ")
    ferry.stop()
    shown = ferry.cli("validate").stdout
    assert f"control state ({ferry.config_topic} on B): flow A->B: topics added: " in shown
    assert dropped in shown.partition("topics removed: ")[2].splitlines()[0].split(", ")
    produce(a, kept, _records(20, "while-stopped"))
    produce(a, dropped, _records(20, "while-stopped"))

    # The restart, as `ferry run` does it (ferry.service), on the session's warm Spark: the
    # control topic is read back before anything copies.
    config = load_config(ferry.config)
    notices: list[str] = []
    restored = Controller.of(config, notices.append).restore()
    control = restored["A->B"]
    assert kept in control.added and dropped in control.removed and not control.paused
    assert len(notices) == 1 and notices[0].startswith("flow A->B: topics added: ")
    assert notices[0].endswith(f"as recorded in {config.api.control_topic} on B")
    base = f"A.{ferry.base}"
    before = record_count(b, base)

    def meanwhile() -> None:
        wait_for(lambda: record_count(b, f"A.{kept}") == 40, 120, f"A.{kept} caught up")
        produce(a, ferry.base, _records(10, f"{topic_name}-marker"))
        wait_for(lambda: record_count(b, base) == before + 10, 120, "the file topic copied")

    run_beside(Runner(config, spark=spark), meanwhile)
    assert record_count(b, f"A.{dropped}") == 20, "a topic removed before the restart was copied"
