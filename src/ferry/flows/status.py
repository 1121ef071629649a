"""What a running flow is doing, as the API and the console say it: one word and why.

Pure code. `ferry run` knows two things about a flow besides the API's override: a cluster it
needs does not answer (retried until it does: `unavailable`) or its copy stopped with an error
retrying cannot fix (`failed`, kept until the flow is restarted, as Kafka Connect keeps a failed
task). A failure outranks a pause: a paused flow that failed must say so, or resuming it would
look like the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ferry.flows.override import FlowControl

__all__ = ["Condition", "FlowStatus", "flow_status"]


@dataclass(frozen=True)
class Condition:
    """What the runner knows of a flow: why it waits, why it stopped (sentences), or None."""

    unavailable: str | None = None
    failed: str | None = None


@dataclass(frozen=True)
class FlowStatus:
    state: str  # running, paused, unavailable or failed
    error: str | None


def flow_status(control: FlowControl, condition: Condition) -> FlowStatus:
    if condition.failed is not None:
        return FlowStatus("failed", condition.failed)
    if control.paused:
        return FlowStatus("paused", condition.unavailable)
    if condition.unavailable is not None:
        return FlowStatus("unavailable", condition.unavailable)
    return FlowStatus("running", None)
