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


def test_link_cut_to_each_side_then_black_holed(case: FaultCase) -> None:
    """The link to the source cut for a minute, then the link to the target, then the link to
    the target black-holed: after each, ferry catches up before the next."""
    case.start_traffic()
    case.await_copies()
    for side, how in (("A", "cut"), ("B", "cut"), ("B", "blackhole")):
        down_since = time.time()
        case.link(side, how)
        said, rpo = case.status_and_rpo_during(  # while the link is down
            "exactly-once", LINK_DOWN_SECONDS, measured_after=down_since
        )
        case.link(side, "restore")
        # `ferry status` during the outage named the cluster it could not reach.
        assert f"cluster {side} (" in said, f"{side} {how}: {said[-3000:]}"
        if side == "B":
            assert rpo and max(rpo) >= 20, f"B {how}: ferry_rpo_seconds {rpo}"
        else:
            # With the source's side cut ferry cannot read A's ends: its RPO is unknown, not
            # an earlier figure and not 0.
            assert rpo == [], f"ferry_rpo_seconds measured with the source cut off: {rpo}"
        case.await_copies(100)
    case.healed()
    assert_exact(case.finish())
    case.assert_rpo_back_to_zero("exactly-once")
