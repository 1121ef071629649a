"""Parsing `ferry local up --set`: which cluster gets which broker setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local.broker import NodePlan, _server_properties
from ferry.local.clusters import parse_cluster_settings


def test_plain_settings_apply_to_every_cluster_and_prefixed_to_one() -> None:
    overrides = parse_cluster_settings(
        ["num.partitions=3", "B:message.max.bytes=2048", "A:listener.name.x=a:b=c"], ["A", "B"]
    )
    assert overrides == {
        "A": {"num.partitions": "3", "listener.name.x": "a:b=c"},
        "B": {"num.partitions": "3", "message.max.bytes": "2048"},
    }


def test_a_value_containing_a_colon_is_not_taken_for_an_alias() -> None:
    overrides = parse_cluster_settings(["listeners=SASL://127.0.0.1:{port}"], ["A"])
    assert overrides == {"A": {"listeners": "SASL://127.0.0.1:{port}"}}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("no-equals", "is not KEY=VALUE or ALIAS:KEY=VALUE"),
        ("=x", "is not KEY=VALUE"),
        ("C:num.partitions=1", "names cluster 'C', which is not one of A, B"),
    ],
)
def test_bad_settings_are_refused_with_the_setting_named(setting: str, message: str) -> None:
    with pytest.raises(LocalClusterError, match=message) as info:
        parse_cluster_settings([setting], ["A", "B"])
    assert setting in str(info.value)


def test_overrides_can_use_the_ports_chosen_at_start() -> None:
    props = _server_properties(
        Path("/x"),
        NodePlan(1, "broker,controller", 9000, 9001),
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}"},
        None,
    )
    assert props["listeners"] == "SASL_PLAINTEXT://127.0.0.1:9000"
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:9001"
    assert props["auto.create.topics.enable"] == "false"
