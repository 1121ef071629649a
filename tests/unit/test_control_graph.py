"""A topic added over the API is checked against the whole replication graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.control.controller import Controller
from ferry.engine.flow_state import FlowState
from ferry.errors import RejectedChangeError
from ferry.flows.override import FlowControl

TOPICS = {"A": {"orders"}, "B": {"orders"}, "C": {"orders", "payments"}}


def _config(tmp_path: Path) -> FerryConfig:
    """Identity A->B and A->C->B, where C->B copies only payments: no double route yet."""
    path = tmp_path / "ferry.properties"
    path.write_text(
        "clusters = A, B, C\n"
        + "".join(f"{a}.bootstrap.servers = 127.0.0.1:{n}\n" for n, a in enumerate("ABC", 1))
        + "A->B.enabled = true\nA->C.enabled = true\nC->B.enabled = true\n"
        "C->B.topics = payments\ntopics = orders\n"
        "replication.policy.class = IdentityReplicationPolicy\n"
        f"ferry.state.dir = {tmp_path / 'state'}\n"
    )
    return load_config(path)


def test_adding_a_topic_that_would_reach_a_remote_topic_twice_is_refused_naming_both_paths(
    tmp_path: Path,
) -> None:
    notices: list[str] = []
    controller = Controller(_config(tmp_path), notices.append, topics=lambda _c, a: TOPICS[a])
    with pytest.raises(RejectedChangeError) as refused:
        controller.add_topic("C", "B", "orders")
    assert str(refused.value) == (
        "A's topic orders reaches B's topic orders twice: A->B, and A->C->B (identity policy "
        "on A->B, A->C, C->B); every record would be copied there twice (nothing was changed)"
    )
    assert FlowState(tmp_path / "state" / "C-to-B").control() == FlowControl()
    assert notices == []
    # A change that adds no error goes through, and the flows that are fine are untouched.
    controller.remove_topic("C", "B", "payments")
    assert controller.control(controller.flow("A", "B")) == FlowControl()
