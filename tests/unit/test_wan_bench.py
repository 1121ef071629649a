"""The WAN benchmark's pure parts: links, cases, windows, settings, broker listeners, report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from bench.wan.cases import (
    Case,
    case_windows,
    cases_for,
    ferry_lines,
    mm2_settings,
    profile_cases,
    with_settings,
)
from bench.wan.clusters import wan_overrides
from bench.wan.link import LinkSpec, parse_links
from bench.wan.model import OsBuffers, Windows
from bench.wan.report import chart, floors, markdown, merge_runs

from ferry.local.broker import NodePlan, _server_properties

OS = OsBuffers(explicit_max=4_194_304, autotune_max=33_554_432)


def test_links_parse_as_rtt_and_megabits() -> None:
    fast, slow = parse_links("100:1000, 60:200")
    assert fast == LinkSpec(0.1, 1e9)
    assert fast.bandwidth == 125e6
    assert fast.label == "100 ms / 1 Gbit/s"
    assert slow.label == "60 ms / 200 Mbit/s"
    with pytest.raises(ValueError, match="'60' is not RTT_MS:MBIT_PER_S"):
        parse_links("60")


def test_the_placement_next_to_the_source_runs_on_the_first_link_only() -> None:
    args = argparse.Namespace(replicators="ferry,mm2", settings="default,wan", near_source="first")
    first = cases_for(args, first_link=True)
    assert [c.label for c in first] == [
        "ferry default",
        "ferry wan",
        "mm2 default",
        "mm2 wan",
        "ferry wan, next to the source",
        "mm2 wan, next to the source",
    ]
    assert len(cases_for(args, first_link=False)) == 4


def test_profile_cases_change_one_thing_each() -> None:
    cases = profile_cases()
    assert cases[0].label == "ferry wan"
    assert "ferry wan + linger.ms=0" in [c.label for c in cases]
    assert all(len(c.extra) == (0 if i == 0 else 1) for i, c in enumerate(cases))
    linger = next(c for c in cases if c.variant == "linger.ms=0")
    assert ferry_lines(linger)[-1] == "B.producer.linger.ms=0"


def test_the_profile_next_to_the_source_varies_the_producer_side() -> None:
    cases = profile_cases("near-source")
    assert {c.placement for c in cases} == {"near-source"}
    assert cases[0].label == "ferry wan, next to the source"
    in_flight = next(c for c in cases if c.variant == "max.in.flight=1")
    assert ferry_lines(in_flight)[-1] == "B.producer.max.in.flight.requests.per.connection=1"


def test_extra_settings_reach_ferry_cases_only_and_are_named() -> None:
    lines = ["ferry.head.start.enabled=false"]
    ferry = with_settings(Case("ferry", "wan", "near-target"), lines)
    assert ferry.label == "ferry wan + ferry.head.start.enabled=false"
    assert ferry_lines(ferry)[-1] == "ferry.head.start.enabled=false"
    mm2 = Case("mm2", "wan", "near-target")
    assert with_settings(mm2, lines) == mm2
    assert with_settings(ferry, []) == ferry


def test_windows_follow_the_client_that_carries_the_records() -> None:
    # Consuming across the link: the consumer's receive buffer is the window back to it.
    assert case_windows(Case("ferry", "default", "near-target"), OS) == Windows(1_048_576, 102400)
    assert case_windows(Case("ferry", "wan", "near-target"), OS) == Windows(33_554_432, 102400)
    assert case_windows(Case("mm2", "default", "near-target"), OS) == Windows(65536, 102400)
    # Across a wide-area link ferry sets the WAN settings itself: the default case's window too.
    far = case_windows(Case("ferry", "default", "near-target"), OS, rtt_ms=60.0)
    assert far == case_windows(Case("ferry", "wan", "near-target"), OS)
    assert case_windows(Case("mm2", "default", "near-target"), OS, rtt_ms=60.0).to_client == 65536
    assert case_windows(Case("mm2", "wan", "near-target"), OS) == Windows(33_554_432, 102400)
    # Producing across the link: the target broker's receive buffer is the window to it.
    target = {"socket.receive.buffer.bytes": "-1"}
    assert case_windows(Case("mm2", "wan", "near-source"), OS, target).to_server == 33_554_432
    assert case_windows(Case("ferry", "wan", "near-source"), OS, {}).to_server == 102400


def test_mm2_defaults_leave_the_source_consumer_alone() -> None:
    bootstraps = ("127.0.0.1:1", "127.0.0.1:2")
    default = mm2_settings(bootstraps, "t", 8, "r", Case("mm2", "default", "near-target"))
    assert not [k for k in default if k.startswith("A.consumer.")]
    assert default["B.producer.acks"] == "all"
    wan = mm2_settings(bootstraps, "t", 8, "r", Case("mm2", "wan", "near-target"))
    assert wan["A.consumer.receive.buffer.bytes"] == "-1"
    assert ferry_lines(Case("ferry", "default", "near-target")) == []
    assert "A.consumer.socket.receive.buffer.bytes=0" in ferry_lines(
        Case("ferry", "wan", "near-target")
    )


def test_the_wan_listener_is_advertised_at_the_link(tmp_path: Path) -> None:
    plan = NodePlan(1, "broker,controller", 9092, 9093)
    props = _server_properties(tmp_path, plan, wan_overrides(9100, 9200), None)
    assert props["listeners"].endswith(",WAN://127.0.0.1:9100")
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,WAN://127.0.0.1:9200"
    )
    assert "WAN:PLAINTEXT" in props["listener.security.protocol.map"].split(",")


def _run(replicator: str, settings: str, rtt: float, **extra: Any) -> dict[str, Any]:
    placement = extra.get("placement", "near-target")
    return {
        "label": f"{replicator} {settings} {placement}",
        "link": f"{rtt:.0f} ms / 200 Mbit/s",
        "rtt_ms": rtt,
        "bandwidth_mbit": 200.0,
        "replicator": replicator,
        "settings": settings,
        "placement": extra.pop("placement", "near-target"),
        "window_to_client": 65536,
        "window_to_server": 102400,
        "backlog_mb_per_s": 8.0,
        "backlog_link_share": 0.32,
        "backlog_complete": True,
        "first_record_seconds": 3.0,
        "backlog_bytes_per_record_to_client": 1070.0,
        "backlog_bytes_per_record_to_server": 2.0,
        "p50_ms": rtt + 3,
        "p99_ms": 1.5 * rtt + 10,
        "steady_bytes_per_record_to_client": 1100.0,
        "steady_bytes_per_record_to_server": 40.0,
        **extra,
    }


def _floor_run(rtt: float) -> dict[str, Any]:
    """A row as bench.wan.floor writes it: no backlog, a steady window only."""
    row = _run("consumer", "wan", rtt, p50_ms=rtt + 1, p99_ms=rtt + 35)
    for key in list(row):
        if key.startswith("backlog") or key == "first_record_seconds":
            del row[key]
    return row


def test_floors_are_one_and_a_half_round_trips() -> None:
    assert floors(60.0) == {"p50_floor_ms": 60.0, "p99_floor_ms": pytest.approx(89.4)}


def test_a_later_run_replaces_the_same_case_only() -> None:
    old = [_run("ferry", "wan", 60), _run("mm2", "wan", 60)]
    new = [_run("ferry", "wan", 60, p50_ms=1.0)]
    merged = merge_runs(old, new)
    assert [(r["replicator"], r["p50_ms"]) for r in merged] == [("mm2", 63), ("ferry", 1.0)]


def test_markdown_and_chart(tmp_path: Path) -> None:
    runs = [
        _run("ferry", "default", 60),
        _run("mm2", "wan", 100),
        _run("ferry", "wan", 60, placement="near-source"),
        _run("mm2", "default", 60, backlog_complete=False),
        _run("ferry", "wan", 60, variant="linger.ms=0"),
        {**_run("mm2", "default", 100), "error": "it broke | badly\nmore"},
        _floor_run(60),
    ]
    report = {
        "date": "today",
        "machine": {"cpu_count": 2, "kafka": "4.1.1"},
        "plan": {
            "records": 1000,
            "value_bytes": 1024,
            "partitions": 8,
            "rate": 2000.0,
            "warmup": 10.0,
            "seconds": 30.0,
            "mm2_tasks": 8,
        },
        "os_buffers": {"explicit_max": 1, "autotune_max": 2},
        "settings": {"ferry wan": {"a": "b"}},
        "runs": runs,
        "proxy_ceiling": [{"path": "loopback", "mb_per_s": 100.0, "link_share": None}],
        "seconds": 12.0,
    }
    text = markdown(report)
    assert (
        "| 60 ms / 200 Mbit/s | near-target | ferry | default | 64 / 100 | 3.0 | 8.0 | 32% |"
        in text
    )
    assert "8.0 (incomplete)" in text
    assert "| ferry | wan + linger.ms=0 |" in text
    assert "failed: it broke / badly |" in text
    assert "| 60 / 89 |" in text
    assert "| loopback | 100.0 |  |" in text
    # The measured floor copies no backlog: its backlog cells stay empty, its latency shows.
    assert "| near-target | consumer | wan | 64 / 100 |  |  |  |  /  | 61 | 95 | 60 / 89 |" in text
    assert "Chart: [wan.png](wan.png)." in text
    assert "Chart" not in markdown(report, None), "a profile writes no chart to link to"
    path = chart(runs, tmp_path / "wan.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fetch_cycles_split_each_loop_into_client_broker_and_link_time() -> None:
    from bench.wan.fetch_cycles import cycles, summary

    chunks = []
    for i in range(3):  # requests every 65 ms; the broker answers 1 ms after one arrives
        t = i * 0.065
        chunks.append((1, "server", t, t + 0.030, 120))
        chunks.append((1, "client", t + 0.031, t + 0.0635, 40_000))  # a 2.5 ms long answer
    chunks.append((2, "server", 0.0, 0.03, 80))  # a metadata request, never answered here
    found = cycles(chunks)
    assert [c.connection for c in found] == [1, 1]
    first = found[0]
    assert first.broker_ms == pytest.approx(1.0)
    assert first.client_ms == pytest.approx(1.5)  # answer delivered at 63.5, next ask at 65
    assert first.cycle_ms == pytest.approx(65.0)
    assert first.answer_bytes == 40_000
    assert summary(found)["loops"] == 2
    assert summary([c for c in found if c.answer_bytes < 1024]) == {"loops": 0}
