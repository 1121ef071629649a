"""List settings keep their items: a YAML list item by item, .properties as MM2 splits it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.errors import ConfigError
from ferry.graph.selection import TopicSelector
from ferry.policy import policy_for

CLUSTERS = "clusters:\n  A: {bootstrap.servers: 'h:1'}\n  B: {bootstrap.servers: 'h:2'}\n"


def _yaml(tmp_path: Path, flow: str) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(CLUSTERS + "A->B:\n  enabled: true\n" + flow)
    return path


def test_a_yaml_regex_with_a_comma_stays_one_regex_and_selects_its_topics(tmp_path: Path) -> None:
    config = load_config(_yaml(tmp_path, "  topics: ['orders-\\d{1,3}', 'pay,ments']\n"))
    flow = config.flow("A", "B")
    assert flow.topics == ("orders-\\d{1,3}", "pay,ments")
    selector = TopicSelector(flow, policy_for(flow.policy, "A"))
    assert selector.select(["orders-1", "orders-123", "orders-1234", "pay,ments", "payments"]) == [
        "orders-1",
        "orders-123",
        "pay,ments",
    ]


def test_a_yaml_scalar_list_is_split_on_commas_as_mm2_does(tmp_path: Path) -> None:
    config = load_config(_yaml(tmp_path, "  topics: 'orders , payments.*'\n"))
    assert config.flow("A", "B").topics == ("orders", "payments.*")


def test_a_properties_list_is_split_on_commas_with_white_space_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A , B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
        "A->B.enabled = true\nA->B.topics = orders ,payments.*,  [a-z]+-\\\\d{2}\n"
    )
    config = load_config(path)
    assert list(config.clusters) == ["A", "B"]
    assert config.flow("A", "B").topics == ("orders", "payments.*", "[a-z]+-\\d{2}")


def test_a_properties_regex_cut_in_two_by_its_comma_is_refused_not_copied_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = h:1\nB.bootstrap.servers = h:2\n"
        "A->B.enabled = true\nA->B.topics = orders-\\\\d{1,3}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "key 'A->B.topics'" in message
    assert "'orders-\\d{1' and '3}'" in message
    assert "ferry.yaml" in message


def test_a_list_for_a_single_valued_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ferry.yaml"
    path.write_text(CLUSTERS + "A->B:\n  enabled: [true, false]\n")
    with pytest.raises(ConfigError, match=r"key 'A->B.enabled'.*takes one boolean, not a list"):
        load_config(path)
