"""`ferry failover flow`: which groups, what to do with each, the report and its exit code,
the recovery point's wording, the API's request shape. No broker: plans are built by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ferry.api.app import create_app
from ferry.config import load_config
from ferry.control.controller import Controller
from ferry.errors import ConfigError
from ferry.offsets.failover import FailoverPlan, NoPositionError
from ferry.offsets.flow_failover import (
    EXIT_SKIPPED,
    FlowFailover,
    GroupOutcome,
    decide,
    failed,
    flow_of,
    no_position,
    parse_flow,
    select_groups,
)
from ferry.offsets.groups import GroupState, group_filter
from ferry.offsets.recovery_point import RecoveryPoint, TopicPoint
from ferry.offsets.translation import Position

CONFIG = (
    "clusters:\n  A: {bootstrap.servers: '127.0.0.1:1'}\n  B: {bootstrap.servers: '127.0.0.1:2'}\n"
    "A->B.enabled: true\nB->A.enabled: true\nA->B.groups.exclude: 'audit-.*|__.*'\n"
)


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(CONFIG)
    return path


def _plan(
    positions: dict[int, int], previous: dict[int, int], members: tuple[str, ...] = ()
) -> FailoverPlan:
    """Group g, topic orders, partition -> translated offset; its offsets on B before."""
    return FailoverPlan(
        "g",
        "A",
        "B",
        "cluster",
        [
            Position("orders", p, o + 3, "A.orders", o, "runs A->B", "exact")
            for p, o in positions.items()
        ],
        [],
        GroupState("g", "STABLE" if members else "EMPTY", members),
        {("A.orders", p): o for p, o in previous.items()},
    )


# --- which groups ----------------------------------------------------------------------------


def test_groups_are_the_flows_filter_then_the_regex_never_ferrys_own(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path))
    flow = flow_of(config, "A->B")
    listed = ["billing", "orders-app", "audit-1", "__internal", "ferry-B-to-A", "billing"]
    own = frozenset(f.progress_group for f in config.flows)
    accepts = group_filter(flow)
    assert select_groups(listed, accepts, None, own) == ["billing", "orders-app"]
    assert select_groups(listed, accepts, re.compile("orders.*"), own) == ["orders-app"]
    # The regex takes whole names, as the config's groups filter does.
    assert select_groups(listed, accepts, re.compile("bill"), own) == []


def test_a_flow_is_named_source_arrow_target_and_must_exist(tmp_path: Path) -> None:
    assert parse_flow("A->B") == ("A", "B")
    for bad in ("A", "A->", "->B", "A->B->C"):
        with pytest.raises(ConfigError, match="SOURCE->TARGET"):
            parse_flow(bad)
    config = load_config(_config(tmp_path))
    with pytest.raises(ConfigError, match="no cluster C; the config has A, B"):
        flow_of(config, "A->C")


# --- what to do with each group ----------------------------------------------------------------


def test_a_group_behind_moves_only_its_partitions_that_are_behind() -> None:
    outcome = decide(_plan({0: 10, 1: 20, 2: 30}, {0: 10, 1: 5}))
    assert outcome.status == "to_move" and outcome.reason is None
    assert [m.action for m in outcome.moves] == ["at", "move", "move"]
    assert [m.previous for m in outcome.moves] == [10, 5, None]


def test_a_group_at_its_position_or_further_is_unchanged_even_with_members() -> None:
    at = decide(_plan({0: 10, 1: 20}, {0: 10, 1: 20}, members=("c1",)))
    assert (at.status, at.reason) == ("unchanged", None)
    assert at.detail == "B already holds this position"
    further = decide(_plan({0: 10, 1: 20}, {0: 10, 1: 27}))
    assert further.status == "unchanged"
    assert "or is further (consumed there since; not moved back)" in further.detail
    assert [m.action for m in further.moves] == ["at", "ahead"]


def test_a_group_to_move_with_members_on_the_target_is_skipped_with_them_named() -> None:
    outcome = decide(_plan({0: 10}, {}, members=("consumer-1", "consumer-2")))
    assert (outcome.status, outcome.reason) == ("skipped", "active_members")
    assert outcome.detail.startswith("2 active member(s) on B (consumer-1, consumer-2)")


def test_a_group_with_nothing_replicated_or_no_position_is_skipped() -> None:
    empty = decide(_plan({}, {}))
    assert (empty.status, empty.reason) == ("skipped", "no_position")
    assert "none of its partitions on A has been replicated to B" in empty.detail
    none = no_position("g", NoPositionError("group g has no committed offsets on cluster A"))
    assert (none.status, none.reason) == ("skipped", "no_position")


def test_a_failure_names_the_group() -> None:
    from ferry.errors import FerryError

    assert failed("g", FerryError("cluster B: boom")).detail == "group g: cluster B: boom"
    named = failed("g", FerryError("cluster B: could not commit group g at t partition 1: x"))
    assert named.detail == "cluster B: could not commit group g at t partition 1: x"


# --- the report ----------------------------------------------------------------------------------


def _report(*statuses: str) -> FlowFailover:
    report = FlowFailover("A->B", "cluster", dry_run=False)
    report.groups = [GroupOutcome(f"g{i}", s) for i, s in enumerate(statuses)]
    return report


def test_the_exit_code_is_0_when_all_moved_or_were_there_3_when_skipped_1_when_failed() -> None:
    assert _report("moved", "unchanged").exit_code == 0
    assert _report().exit_code == 0
    assert _report("moved", "skipped").exit_code == EXIT_SKIPPED == 3
    assert _report("skipped", "failed").exit_code == 1


def test_the_report_as_json_says_each_group_and_the_recovery_point() -> None:
    report = _report("moved", "skipped")
    report.groups[0] = decide(_plan({0: 10}, {}))
    report.recovery = RecoveryPoint(
        "measured", "A", "B", 1_000_000, [TopicPoint("orders", 0.0, offsets_behind=0)]
    )
    data = json.loads(json.dumps(report.as_json()))
    assert data["summary"] == {"moved": 0, "to_move": 1, "unchanged": 0, "skipped": 1, "failed": 0}
    assert data["exit_code"] == 3 and (data["from"], data["to"]) == ("A", "B")
    move = data["groups"][0]["partitions"][0]
    assert (move["target_topic"], move["offset"], move["previous"], move["action"]) == (
        "A.orders",
        10,
        None,
        "move",
    )
    point = data["recovery_point"]
    assert point["kind"] == "measured" and point["age_seconds"] == 0.0
    assert point["statement"] == "every record on A is on B (caught up)"
    assert point["topics"] == [
        {
            "topic": "orders",
            "age_seconds": 0.0,
            "offsets_behind": 0,
            "copied_until": None,
            "partitions_without_copies": 0,
        }
    ]


def test_the_recovery_point_says_what_the_target_proves_when_the_source_is_lost() -> None:
    at = 1_700_000_060_000
    point = RecoveryPoint(
        "proven",
        "A",
        "B",
        at,
        [
            TopicPoint("orders", 60.0, copied_until_ms=at - 60_000),
            TopicPoint("payments", 5.0, copied_until_ms=at - 5_000, uncopied=2),
        ],
        copied_until_ms=at - 60_000,
        newest_heartbeat_ms=at - 2_000,
    )
    assert point.age_seconds == 60.0
    text = point.statement()
    assert text.startswith("records written to A after 2023-11-14T22:13:20.000+00:00 (60.0 s ago)")
    assert "may be on A only" in text and "2 partition(s) with no copy on B are not counted" in text
    data = point.as_json()
    assert data["newest_heartbeat_age_seconds"] == 2.0
    assert data["copied_until"] == "2023-11-14T22:13:20.000+00:00"
    behind = RecoveryPoint("measured", "A", "B", at, [TopicPoint("orders", 12.5, 40)])
    assert behind.statement() == "the oldest record on A not yet on B is 12.5 s old"
    nothing = RecoveryPoint("proven", "A", "B", at, [])
    assert nothing.statement() == "B holds no copy of any record of A"


# --- the API (the command line: test_cli_failover.py) ---------------------------------------------


def test_the_api_takes_a_flow_or_a_group_never_both(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path))
    calls: list[tuple[Any, ...]] = []

    def flow_failover(*args: Any) -> dict[str, Any]:
        calls.append(args)
        return {"flow": args[0], "groups": []}

    controller = Controller(config, lambda _n: None, topics=lambda _c, _f: set())
    app = create_app(controller, token=None, failover_flow=flow_failover)
    client = TestClient(app)
    answer = client.post("/api/v1/failover", json={"flow": "A->B", "groups": "orders-.*"})
    assert answer.status_code == 200 and answer.json()["flow"] == "A->B"
    agreeing = client.post("/api/v1/failover", json={"flow": "A->B", "from": "A", "to": "B"})
    assert agreeing.status_code == 200
    assert calls == [("A->B", "orders-.*", False, False), ("A->B", None, False, False)]
    for body in (
        {"flow": "A->B", "group": "g", "from": "A", "to": "B"},
        {"dry_run": True},
        {"group": "g"},
        {"group": "g", "from": "A", "to": "B", "groups": "x"},
        {"flow": "A->B", "from": "B", "to": "A"},
        {"flow": "AB"},
    ):
        assert client.post("/api/v1/failover", json=body).status_code == 422, body
    assert len(calls) == 2
    schema = client.get("/openapi.json").json()["components"]["schemas"]["FailoverRequest"]
    assert {"flow", "groups", "group", "from", "to"} <= set(schema["properties"])


def test_the_text_report_prints_groups_and_topics_verbatim() -> None:
    from ferry.cli.failover_commands import _print_flow_report
    from ferry.terminal.console import err, out

    plan = _plan({0: 10}, {})
    plan.group = "[bold]billing"
    plan.positions = [
        Position("[red]orders", 0, 13, "A.[red]orders", 10, "checkpoint", "checkpoint")
    ]
    report = FlowFailover("A->B", "checkpoints", dry_run=True)
    report.groups = [decide(plan), GroupOutcome("[x]busy", "skipped", "active_members", "1 active")]
    report.notices = ["cluster A (127.0.0.1:1) is unreachable"]
    report.recovery = RecoveryPoint(
        "proven", "A", "B", 10_000, [TopicPoint("[red]orders", 5.0, copied_until_ms=5_000)], 5_000
    )
    width = out.width
    out.width = 200
    try:
        with out.capture() as captured, err.capture() as errors:
            _print_flow_report(report)
    finally:
        out.width = width
    text = captured.get()
    assert "flow A->B: failover from the checkpoints in B" in text
    assert "[bold]billing" in text and "A.[red]orders" in text and "to move" in text
    assert "group [bold]billing: to move: 1 partition(s) to move on B" in text
    assert "group [x]busy: skipped (active members): 1 active" in text
    assert "recovery point: records written to A after 1970-01-01T00:00:05.000+00:00" in text
    assert "  [red]orders: copied until 5.0 s ago" in text
    assert (
        "1 group(s)" not in text
        and "2 group(s): 0 moved, 1 to move, 0 unchanged, 1 skipped" in text
    )
    assert text.rstrip().endswith("dry run: nothing was committed")
    assert "note: cluster A (127.0.0.1:1) is unreachable" in errors.get()


def test_groups_are_planned_side_by_side_and_reported_in_order() -> None:
    """Up to CONCURRENT_GROUPS at a time; answers in the items' order whatever order they
    finished in."""
    import threading
    import time

    from ferry.offsets import flow_failover

    running, most = [0], [0]
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02 * (i % 3))  # finish out of order
        with lock:
            running[0] -= 1
        return i * 10

    items = list(range(40))
    assert flow_failover._side_by_side(work, items) == [i * 10 for i in items]
    assert 1 < most[0] <= flow_failover.CONCURRENT_GROUPS


def test_side_by_side_raises_the_first_failure_in_order() -> None:
    from ferry.offsets import flow_failover

    def work(i: int) -> int:
        if i in (5, 9):
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 5"):
        flow_failover._side_by_side(work, list(range(20)))


def test_a_source_refusing_every_connection_is_given_up_after_the_probe() -> None:
    """Decided once, fast: every broker refuses (nothing listens on port 1), so the source is
    taken for lost after PROBE_SECONDS, not after the whole timeout."""
    import time

    from ferry.config.model import ClusterConfig
    from ferry.errors import KafkaUnavailableError
    from ferry.offsets import flow_failover

    began = time.monotonic()
    with pytest.raises(KafkaUnavailableError) as caught:
        flow_failover._listed(ClusterConfig(alias="A", bootstrap_servers="127.0.0.1:1"), 30.0)
    assert caught.value.cluster == "A"
    assert time.monotonic() - began < 3 * flow_failover.PROBE_SECONDS + 1


def test_checkpoints_by_group_follow_tombstones() -> None:
    """A group's checkpoints are found by group (no scan of all); a tombstone removes one,
    and a group with none left is no longer listed."""
    from ferry.config.model import ClusterConfig
    from ferry.kafka.mm2_records import Checkpoint
    from ferry.offsets.runs_and_checkpoints import CheckpointStore

    store = CheckpointStore(ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:2"), "t")
    for group, partition in (("g1", 1), ("g1", 0), ("g2", 0)):
        store.remember(Checkpoint(group, "orders", partition, 10 + partition, 20))
    store.remember(Checkpoint("g1", "orders", 1, 15, 25))  # newer, replaces
    assert store.groups() == ["g1", "g2"]
    assert [(c.partition, c.upstream_offset) for c in store.of_group("g1")] == [(0, 10), (1, 15)]
    store._forget("g2", "orders", 0)
    assert store.groups() == ["g1"]
    assert store.of_group("g2") == []
    assert store.latest("g2", "orders", 0) is None
    store.close()
