"""The web console in a real headless Chromium (Debian's, driven by Playwright) against a real
`ferry run --api-port 0` and the session's brokers: the page asks for the token, draws the
flow's lag chart, and its Pause button pauses the flow (the source grows, the target does
not) until Resume catches up. Screenshots go to `artifacts/console/` (named in the output).

Chromium comes from `scripts/install_chromium.sh` (run by `make test-api`), not from
Playwright's own downloads.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ferry.engine.flow_state import FlowState
from ferry.local.cluster import LocalCluster
from tests.integration.kafka_helpers import Rec, create_topic, produce, record_count
from tests.integration.replication_setup import write_config
from tests.integration.test_control_api import TOKEN, FerryRun, wait_for

# Its own ferry run and Spark (minutes on a busy machine): `make test-api`.
pytestmark = [pytest.mark.api, pytest.mark.timeout(900)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "console"


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no Chromium on PATH: run scripts/install_chromium.sh (make test-api does)")


@pytest.fixture
def ferry(
    kafka_clusters: dict[str, LocalCluster], tmp_path: Path, topic_name: str
) -> Iterator[FerryRun]:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    create_topic(a, topic_name, 1)
    # A's heartbeats topic there from the start (not first made by this run's emitter), so the
    # flow's first lease copies it and the console lists it.
    new = NewTopic("heartbeats", num_partitions=1, replication_factor=1)
    admin = AdminClient({"bootstrap.servers": a})  # held: a client collected ends its requests
    try:
        admin.create_topics([new])["heartbeats"].result(30)
    except KafkaException as exc:  # made already (an earlier run's emitter): as good
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        **{
            "ferry.lease.seconds": 300,
            "ferry.commit.interval.ms": 200,
            "emit.checkpoints.enabled": "false",
            "sync.topic.configs.enabled": "false",
            "sync.topic.acls.enabled": "false",
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
        },
    )
    run = FerryRun(config, tmp_path / "state", tmp_path / "ferry.log", a, b, topic_name, "")
    try:
        run.start()
        yield run
        run.stop()  # exits 0: stopped cleanly with the flow running
    finally:
        if run.proc is not None:  # a start that timed out, or a failed test
            run.proc.kill()
            run.proc.wait(30)


def _records(count: int, tag: str) -> list[Rec]:
    return [Rec(0, f"k{i}".encode(), f"{tag}-{i}".encode(), (), 0) for i in range(count)]


def test_the_console_draws_the_flow_and_pauses_and_resumes_it(
    ferry: FerryRun, capsys: pytest.CaptureFixture[str]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    topic, remote = ferry.base, f"A.{ferry.base}"
    produce(ferry.a, topic, _records(100, "before"))
    wait_for(lambda: record_count(ferry.b, remote) == 100, 90, f"{remote} copied", ferry)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = ARTIFACTS / uuid.uuid4().hex[:8]
    shots.mkdir()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=_chromium(), headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(ferry.url + "/")
            # No token yet: the page asks for one and shows no flow.
            expect(page.locator("#login")).to_be_visible(timeout=30_000)
            assert page.locator("section.flow").count() == 0
            page.fill("#token", TOKEN)
            page.click("#login button[type=submit]")

            flow = page.locator('section.flow[data-flow="A->B"]')
            expect(flow.locator(".state")).to_have_text("running", timeout=30_000)
            lag_chart = flow.locator('svg[data-series="lag"]')
            # A sample every 5 s: two make a line (the page refreshes every 5 s too).
            page.wait_for_function(
                """() => {
                  const svg = document.querySelector('section.flow svg[data-series="lag"]');
                  return svg && Number(svg.dataset.points) >= 2;
                }""",
                timeout=60_000,
            )
            points = lag_chart.locator("polyline").get_attribute("points") or ""
            assert len(points.split()) >= 2, points
            assert topic in flow.locator(".topic-list").inner_text()
            # heartbeats always travel: listed apart from the flow's topics, not removable.
            internal = flow.locator(".internal-topic-list li", has_text="heartbeats")
            expect(internal).to_be_visible(timeout=30_000)
            assert internal.locator("button").count() == 0
            assert "heartbeats" not in flow.locator(".topic-list").inner_text()
            assert ferry.ok("GET", "/api/v1/flows/A/B")["internal_topics"] == ["heartbeats"]
            # ferry monitor's rule runs inside ferry run: nothing in sync delay while it copies.
            expect(page.locator("#alerts li")).to_have_text(
                "none: every sampled series keeps up", timeout=30_000
            )
            assert ferry.ok("GET", "/api/v1/alerts") == []
            page.screenshot(path=str(shots / "running.png"), full_page=True)

            state = FlowState(ferry.state / "A-to-B")
            lease = state.stats().get("lease")
            flow.locator("button.toggle", has_text="Pause").click()
            expect(flow.locator(".state")).to_have_text("paused", timeout=30_000)
            assert ferry.ok("GET", "/api/v1/flows/A/B")["state"] == "paused"
            wait_for(lambda: state.stats().get("lease") != lease, 60, "the lease ended", ferry)
            produce(ferry.a, topic, _records(200, "while-paused"))
            wait_for(lambda: _lag(ferry) == 200, 60, "the paused flow's lag reaching 200", ferry)
            assert record_count(ferry.b, remote) == 100
            expect(flow.locator(".lag")).to_have_text("200 records", timeout=30_000)
            page.screenshot(path=str(shots / "paused.png"), full_page=True)

            flow.locator("button.toggle", has_text="Resume").click()
            expect(flow.locator(".state")).to_have_text("running", timeout=30_000)
            wait_for(lambda: record_count(ferry.b, remote) == 300, 90, "caught up", ferry)
            events = page.locator("#events")
            expect(events).to_contain_text("flow A->B: paused over the API", timeout=30_000)
            expect(events).to_contain_text("flow A->B: resumed over the API")
        finally:
            browser.close()
    with capsys.disabled():
        print(f"\nconsole screenshots: {shots}")


def _lag(ferry: FerryRun) -> int:
    partitions: list[dict[str, Any]] = ferry.ok("GET", "/api/v1/flows/A/B")["partitions"]
    return sum(p["lag"] or 0 for p in partitions)
