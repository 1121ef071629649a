"""The link between the datacenters failing while both clusters stay up: cut (every connection
reset, new ones refused) and black-holed (no reset: bytes stop, as a dead WAN link does),
for a minute, on the source's side and the target's. ferry waits, names the cluster it cannot
reach, and catches up with nothing lost or doubled."""

from __future__ import annotations

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
    said = case.status("exactly-once")  # while the link is down
    # The source's side cut: ferry cannot read A's ends either, so its RPO is unknown, not 0.
    rpo = case.rpo_during("exactly-once", LINK_DOWN_SECONDS)
    case.link(side, "restore")
    case.healed()
    assert_exact(case.finish())
    # `ferry status` during the outage named the cluster it could not reach.
    assert f"cluster {side} (" in said, said[-3000:]
    if side == "B":
        assert rpo and max(rpo) >= 20, f"ferry_rpo_seconds during the outage: {rpo}"
    else:
        assert not rpo or max(rpo) >= 20, f"an RPO of {max(rpo)} s with the source cut off"
    case.assert_rpo_back_to_zero("exactly-once")
