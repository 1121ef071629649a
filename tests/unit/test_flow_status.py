"""What the API says a flow is doing: a failure outranks a pause, a pause an outage."""

from __future__ import annotations

from ferry.flows.override import FlowControl
from ferry.flows.status import Condition, FlowStatus, flow_status

DOWN = "cluster B (127.0.0.1:2) is unreachable: Connection refused"
FAILED = "flow A->B failed in Spark: TOPIC_AUTHORIZATION_FAILED"


def test_a_flow_runs_unless_something_says_otherwise() -> None:
    assert flow_status(FlowControl(), Condition()) == FlowStatus("running", None)


def test_an_unanswering_cluster_makes_it_unavailable_with_the_reason() -> None:
    assert flow_status(FlowControl(), Condition(unavailable=DOWN)) == FlowStatus(
        "unavailable", DOWN
    )


def test_a_paused_flow_is_paused_and_still_says_why_it_could_not_copy() -> None:
    paused = FlowControl().pause()
    assert flow_status(paused, Condition()) == FlowStatus("paused", None)
    assert flow_status(paused, Condition(unavailable=DOWN)) == FlowStatus("paused", DOWN)


def test_a_failure_outranks_a_pause_and_an_outage() -> None:
    for control in (FlowControl(), FlowControl().pause()):
        for down in (None, DOWN):
            condition = Condition(unavailable=down, failed=FAILED)
            assert flow_status(control, condition) == FlowStatus("failed", FAILED)
