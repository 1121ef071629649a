"""A flow's runtime override (topics added or removed over the API, pause): the last word on a
topic wins, the file decides every topic the API never named, and the record round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.config.model import FlowConfig
from ferry.flows.override import FlowControl
from ferry.graph.selection import TopicSelector
from ferry.policy import PrefixPolicy

TOPICS = st.sampled_from(["orders", "payments", "audit", "A.orders"])
CHANGES = st.lists(st.tuples(st.sampled_from(["add", "remove"]), TOPICS), max_size=12)


@given(CHANGES, st.booleans())
def test_the_last_word_on_a_topic_wins_and_the_file_decides_the_rest(
    changes: list[tuple[str, str]], by_file: bool
) -> None:
    control = FlowControl()
    last: dict[str, bool] = {}
    for action, topic in changes:
        control = control.add(topic) if action == "add" else control.remove(topic)
        last[topic] = action == "add"
    for topic in ["orders", "payments", "audit", "A.orders", "never-named"]:
        assert control.listed(topic, by_file) == last.get(topic, by_file)
    assert not (control.added & control.removed)


@given(CHANGES, st.booleans())
def test_a_record_reads_back_as_written(changes: list[tuple[str, str]], paused: bool) -> None:
    control = FlowControl(paused=paused)
    for action, topic in changes:
        control = control.add(topic) if action == "add" else control.remove(topic)
    assert FlowControl.from_bytes(control.to_bytes()) == control


def test_no_record_means_what_the_file_says() -> None:
    assert FlowControl.from_bytes(None) == FlowControl() == FlowControl.from_bytes(b"")
    assert FlowControl().empty and not FlowControl().pause().empty
    assert FlowControl().pause().resume() == FlowControl()


@pytest.mark.parametrize("data", [b"[1]", b'{"added": [3]}', b'{"paused": "yes"}', b"{oops"])
def test_a_record_ferry_did_not_write_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        FlowControl.from_bytes(data)


def test_the_selector_follows_the_override_but_never_the_naming_rules() -> None:
    flow = FlowConfig(source="A", target="B", topics=("orders",))
    control = FlowControl().add("payments").remove("orders").add("B.orders")
    selector = TopicSelector(flow, PrefixPolicy(), control)
    assert selector.accepts("payments")
    assert not selector.accepts("orders")
    assert not selector.accepts("B.orders"), "a topic from the target is never copied back"
    assert selector.accepts("heartbeats"), "heartbeats travel whatever the lists say"
    assert TopicSelector(flow, PrefixPolicy()).accepts("orders")


def test_a_flow_copies_only_when_it_runs_and_is_not_paused() -> None:
    control = FlowControl()
    assert control.copying("A->B", by_file=False) is None  # the file does not enable it
    assert control.copying("A->B", by_file=True) == (
        "flow A->B runs: the config file enables it and its control record neither stops nor "
        "pauses it"
    )
    assert control.pause().copying("A->B", by_file=True) is None
    assert control.enable(False).copying("A->B", by_file=True) is None
    assert control.enable(True).copying("A->B", by_file=False) == (
        "flow A->B runs: its control record turned it on"
    )
