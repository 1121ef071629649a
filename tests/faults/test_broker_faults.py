"""Brokers failing under a running copy, on 3-node clusters at RF 3 and min.insync.replicas 2:
partition leaders hard-bounced, the coordinators and the active controller killed, rolling
restarts, the target below min.insync.replicas. Both delivery modes copy through each fault;
afterwards every acknowledged record is on the target, once (exactly-once) or at least once,
in order, and nothing of an aborted transaction."""

from __future__ import annotations

import signal
import time

import pytest

from tests.faults.harness import (
    FaultCase,
    active_controller,
    assert_exact,
    coordinator_of,
    known_controller,
    leader_of,
    wait_for,
)

# A fault, its recovery and the catch-up after it: longer than the default bound per test.
pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

BOUNCE_DOWN_SECONDS = 15  # how long a hard-bounced node stays down (the fault's length)
UNDER_MIN_ISR_SECONDS = 30  # how long 2 of B's 3 nodes stay down


def test_source_leader_hard_bounced_three_times(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    for _ in range(3):
        leader = leader_of(case.clusters["A"], case.topic("exactly-once"))
        case.kill("A", leader)
        time.sleep(BOUNCE_DOWN_SECONDS)  # the fault: the node stays down this long
        case.start("A", leader)
        case.await_copies(100)
    case.healed()
    assert_exact(case.finish())


def test_target_leader_killed(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    leader = leader_of(case.clusters["B"], case.remote("exactly-once"))
    case.kill("B", leader)
    case.await_copies(200)  # the copy goes on with the new leaders
    case.start("B", leader)
    case.healed()
    assert_exact(case.finish())


def test_transaction_coordinator_killed(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    txn_id = "ferry:A->B:task/0"  # the first copy task's, which every plan has
    coordinator = coordinator_of(case.clusters["B"], txn_id, "__transaction_state")
    case.kill("B", coordinator)
    case.await_copies(200)
    case.start("B", coordinator)
    case.healed()
    assert_exact(case.finish())


def test_active_controller_killed_on_each_side(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    for side in ("A", "B"):
        controller = known_controller(case.clusters[side])
        case.kill(side, controller)
        wait_for(
            lambda s=side, c=controller: active_controller(case.clusters[s]) not in (None, c),  # type: ignore[misc]
            300,
            f"a new active controller on {side}",
            poll=1.0,
        )
        case.await_copies(200)
        case.start(side, controller)
    case.healed()
    assert_exact(case.finish())


def test_rolling_restart_of_both_clusters(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    for side in ("A", "B"):
        for node in (1, 2, 3):
            case.kill(side, node, signal.SIGTERM)
            case.start(side, node)
            wait_for(lambda s=side: case.under_replicated(s) == 0, 120, f"{side}'s ISR refilled")  # type: ignore[misc]
    case.await_copies(100)
    case.healed()
    assert_exact(case.finish())


def test_target_below_min_insync_replicas(case: FaultCase) -> None:
    case.start_traffic()
    case.await_copies()
    leader = leader_of(case.clusters["B"], case.remote("exactly-once"))
    others = [n for n in (1, 2, 3) if n != leader]
    down_since = time.time()
    for node in others:
        case.kill("B", node)
    said, rpo = case.status_and_rpo_during(  # while 2 of 3 nodes are down
        "exactly-once", UNDER_MIN_ISR_SECONDS, measured_after=down_since
    )
    for node in others:
        case.start("B", node)
    case.healed()
    assert_exact(case.finish())
    # ferry status said why: B answers, its partitions are below min.insync.replicas.
    assert "cluster B" in said and "min.insync.replicas" in said, said[-3000:]
    # The recovery point grew while B could not take writes, and is 0 again once caught up.
    assert rpo and max(rpo) >= 10, f"ferry_rpo_seconds during the outage: {rpo}"
    case.assert_rpo_back_to_zero("exactly-once")
