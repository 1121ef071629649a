"""The link between the datacenters failing while both clusters stay up: cut (every connection
reset, new ones refused) and black-holed (no reset: bytes stop, as a dead WAN link does),
for a minute, on the source's side and the target's. ferry waits, names the cluster it cannot
reach, and catches up with nothing lost or doubled."""

from __future__ import annotations

import time

import pytest

from tests.faults.harness import FaultCase, assert_exact

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

LINK_DOWN_SECONDS = 60  # the fault's length


@pytest.mark.parametrize(("side", "how"), [("A", "cut"), ("B", "cut"), ("B", "blackhole")])
def test_link_lost_for_a_minute(case: FaultCase, side: str, how: str) -> None:
    case.start_traffic()
    case.await_copies()
    case.link(side, how)
    began = time.monotonic()
    statuses = []
    while time.monotonic() - began < LINK_DOWN_SECONDS:  # the fault lasts this long
        statuses.append(case.status("exactly-once"))
    case.link(side, "restore")
    case.healed()
    assert_exact(case.finish())
    # `ferry status` during the outage named the cluster it could not reach.
    said = "\n".join(statuses)
    assert f"cluster {side}" in said or f"{side} (" in said or f"'{side}'" in said, said[-3000:]
