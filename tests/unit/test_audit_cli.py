"""`ferry audit`'s outputs and exit codes, on results given in place of the Spark job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ferry.audit import report, spark_job
from ferry.audit.model import TopicResult
from ferry.cli.app import app
from ferry.errors import FerryError

CONFIG = (
    "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
    "A->B.enabled: true\n"
)


def _clean() -> TopicResult:
    return TopicResult(
        "orders[eu]", "A.orders[eu]", source=10, copied=10, copies=10, buckets={0: {}}
    )


def _broken() -> TopicResult:
    return TopicResult(
        "pay",
        "A.pay",
        source=12,
        copied=8,
        copies=9,
        missing=2,
        duplicated=1,
        foreign=1,
        in_flight=2,
        missing_ranges=[{"partition": 0, "first": 3, "last": 4, "count": 2}],
        duplicated_ranges=[{"partition": 1, "first": 7, "last": 7, "count": 1}],
        foreign_ranges=[{"partition": 1, "first": 9, "last": 9, "count": 1}],
        buckets={
            60_000: {"source": 6, "target": 6, "missing": 0},
            120_000: {"source": 6, "target": 3, "missing": 2},
        },
    )


def _audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topics: list[TopicResult], *args: str
) -> Any:
    seen: dict[str, Any] = {}

    def fake(config: Any, chains: list[Any], **options: Any) -> dict[str, list[TopicResult]]:
        seen.update(options, flows=["/".join(f.name for f in chain) for chain in chains])
        return {"A->B": topics}

    monkeypatch.setattr(spark_job, "audit_flows", fake)
    path = tmp_path / "ferry.yaml"
    path.write_text(CONFIG)
    result = CliRunner().invoke(app, ["audit", "-c", str(path), *args])
    return result, seen


def test_a_clean_audit_exits_0_and_prints_topics_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, seen = _audit(tmp_path, monkeypatch, [_clean()], "--bucket", "30s")
    assert result.exit_code == 0, result.output
    assert "orders[eu]" in result.output and "100.00%" in result.output
    assert seen["bucket_ms"] == 30_000 and seen["flows"] == ["A->B"]


def test_missing_records_exit_3_with_their_ranges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = _audit(tmp_path, monkeypatch, [_clean(), _broken()])
    assert result.exit_code == 3, result.output
    assert "missing in pay (partition:offsets): 0:3-4 (2)" in result.output
    assert "foreign in A.pay (partition:offsets): 1:9-9 (1)" in result.output
    assert "80.00%" in result.output  # 8 of the 10 due (2 in flight)


def test_json_and_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    result, _ = _audit(tmp_path, monkeypatch, [_broken()], "--json", "--out", str(out))
    assert result.exit_code == 3
    document = json.loads(result.output)
    flow = document["flows"]["A->B"]
    assert (flow["missing"], flow["duplicated"]) == (2, 1)
    topic = flow["topics"]["pay"]
    assert topic["missing_ranges"] == [{"partition": 0, "first": 3, "last": 4, "count": 2}]
    assert [b["start_ms"] for b in topic["buckets"]] == [60_000, 120_000]
    assert json.loads((out / "audit.json").read_text()) == document
    assert (out / "audit.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_an_unknown_flow_or_bad_bucket_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FerryError: main() prints it as one line and exits 1.
    result, _ = _audit(tmp_path, monkeypatch, [], "--flow", "A->Z")
    assert isinstance(result.exception, FerryError)
    assert "--flow 'A->Z': no enabled flow A->Z, and no chain of enabled flows" in str(
        result.exception
    )
    result, _ = _audit(tmp_path, monkeypatch, [], "--bucket", "soon")
    assert isinstance(result.exception, FerryError)
    assert "bucket 'soon' is not a positive duration" in str(result.exception)


def test_completeness_counts_only_what_is_due() -> None:
    assert report.completeness(_broken()) == pytest.approx(80.0)
    everything_in_flight = TopicResult("t", "A.t", source=3, in_flight=3)
    assert report.completeness(everything_in_flight) == 100.0


CHAIN = (
    "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
    "  C: {bootstrap.servers: '127.0.0.1:3'}\n  D: {bootstrap.servers: '127.0.0.1:4'}\n"
    "A->B.enabled: true\nB->C.enabled: true\nA->D.enabled: true\nD->C.enabled: false\n"
)


def _chain_config(tmp_path: Path, text: str = CHAIN) -> Any:
    from ferry.config import load_config

    path = tmp_path / "chain.yaml"
    path.write_text(text)
    return load_config(path)


def test_a_chain_is_named_hop_by_hop_or_found_when_only_one_leads_there(tmp_path: Path) -> None:
    from ferry.audit.chain import chain_flows

    flows = _chain_config(tmp_path).flows
    assert [f.name for f in chain_flows(flows, "A->B->C")] == ["A->B", "B->C"]
    assert [f.name for f in chain_flows(flows, "A->C")] == ["A->B", "B->C"]
    assert [f.name for f in chain_flows(flows, "D->C")] == ["D->C"], "a configured flow itself"


def test_a_chain_through_a_disabled_flow_or_two_chains_is_refused_by_name(tmp_path: Path) -> None:
    from ferry.audit.chain import chain_flows
    from ferry.errors import ConfigError

    flows = _chain_config(tmp_path).flows
    with pytest.raises(ConfigError, match="the flow D->C is not enabled"):
        chain_flows(flows, "A->D->C")
    both = _chain_config(tmp_path, CHAIN.replace("D->C.enabled: false", "D->C.enabled: true"))
    with pytest.raises(ConfigError, match="2 chains leads there: A->B->C; A->D->C"):
        chain_flows(both.flows, "A->C")


def test_replication_delay_is_shown_where_measured_and_dashed_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamped = _clean()
    stamped.topic = "stamped"
    stamped.delay_p50_ms, stamped.delay_p99_ms = 1_500, 62_000
    counts = {"source": 10, "target": 10, "missing": 0}
    stamped.buckets = {0: {**counts, "delay_p50_ms": 1_500, "delay_p99_ms": 62_000}}
    out = tmp_path / "out"
    result, _ = _audit(tmp_path, monkeypatch, [stamped], "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "1.5 s / 62.0 s" in result.output
    rows = report.table_rows([_clean(), stamped])
    assert [row[-1] for row in rows] == ["-", "1.5 s / 62.0 s"]
    document = json.loads((out / "audit.json").read_text())
    topics = document["flows"]["A->B"]["topics"]
    assert (topics["stamped"]["delay_p50_ms"], topics["stamped"]["delay_p99_ms"]) == (1_500, 62_000)
    assert topics["stamped"]["buckets"][0]["delay_p99_ms"] == 62_000
    assert (out / "audit.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
