"""A topic listed by name that MM2's internal-topic rule keeps home is named at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config.entries import Entry
from ferry.config.loader import parse_entries


def notes(tmp_path: Path, *settings: tuple[str, str]) -> tuple[str, ...]:
    entries = [
        Entry("clusters", "A, B", 1),
        Entry("A.bootstrap.servers", "h:1", 2),
        Entry("B.bootstrap.servers", "h:2", 3),
        *(Entry(key, value, 4 + i) for i, (key, value) in enumerate(settings)),
    ]
    return parse_entries(entries, base_dir=tmp_path).notes


@pytest.mark.parametrize(
    ("listed", "topic", "why"),
    [
        ("app.internal", "app.internal", "ends in '.internal'"),
        ("app\\.internal", "app.internal", "ends in '.internal'"),
        ("app-internal", "app-internal", "ends in '-internal'"),
        ("__app", "__app", "starts with '__'"),
        (".app", ".app", "starts with '.'"),
    ],
)
def test_an_internal_topic_named_exactly_is_said_with_its_rule(
    tmp_path: Path, listed: str, topic: str, why: str
) -> None:
    said = notes(tmp_path, ("A->B.enabled", "true"), ("topics", f"orders, {listed}"))
    assert len(said) == 1
    assert f"key 'topics' (line 5) names topic '{topic}'" in said[0]
    assert "flow A->B will not copy" in said[0] and why in said[0]
    assert "internal topics are never replicated" in said[0]


def test_one_notice_names_every_flow_that_shares_the_list(tmp_path: Path) -> None:
    said = notes(
        tmp_path, ("A->B.enabled", "true"), ("B->A.enabled", "true"), ("topics", "x-internal")
    )
    assert len(said) == 1 and "flows A->B, B->A will not copy" in said[0]


def test_a_flows_own_list_is_named_with_its_key(tmp_path: Path) -> None:
    said = notes(tmp_path, ("A->B.enabled", "true"), ("A->B.topics", "__x"))
    assert len(said) == 1 and said[0].startswith("key 'A->B.topics' (line 5) names topic '__x'")


@pytest.mark.parametrize("listed", [".*", "app.*", "app\\..*internal", "orders", "x_internal"])
def test_patterns_and_ordinary_names_say_nothing(tmp_path: Path, listed: str) -> None:
    assert notes(tmp_path, ("A->B.enabled", "true"), ("topics", listed)) == ()


def test_a_disabled_flow_says_nothing(tmp_path: Path) -> None:
    assert notes(tmp_path, ("topics", "app.internal")) == ()


def test_a_custom_separator_names_its_own_suffix(tmp_path: Path) -> None:
    said = notes(
        tmp_path,
        ("A->B.enabled", "true"),
        ("replication.policy.separator", "_"),
        ("topics", "app_internal"),
    )
    assert len(said) == 1 and "ends in '_internal'" in said[0]


def test_a_control_topic_a_flow_would_copy_is_said(tmp_path: Path) -> None:
    # Without api.control.cluster the control topic lives on each flow's target: B here,
    # where B->A's `.*` would take a name that is not internal.
    said = notes(
        tmp_path,
        ("A->B.enabled", "true"),
        ("B->A.enabled", "true"),
        ("topics", ".*"),
        ("api.control.topic", "ferry-control"),
    )
    assert said == (
        "flow A->B would copy the control topic 'ferry-control' from A: give "
        "api.control.topic a name ending in '.internal' (internal topics are never "
        "replicated), or exclude it in topics.exclude",
        "flow B->A would copy the control topic 'ferry-control' from B: give "
        "api.control.topic a name ending in '.internal' (internal topics are never "
        "replicated), or exclude it in topics.exclude",
    )


def test_the_default_control_topic_is_internal_and_never_copied(tmp_path: Path) -> None:
    assert notes(tmp_path, ("A->B.enabled", "true"), ("B->A.enabled", "true")) == ()
    assert notes(tmp_path, ("A->B.enabled", "true"), ("api.control.topic", "ctl")) == ()
