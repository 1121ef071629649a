"""The switchover's step machine (ferry.flows.switchover): what comes next from the recorded
steps and what is observed; the writers' fence built from ACLs; the proof's counts."""

from __future__ import annotations

import json
import os
import socket

import psutil
import pytest

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.control.switchover import elsewhere
from ferry.flows.override import FlowControl, effective_config
from ferry.flows.switchover import (
    DRAIN,
    FENCE,
    GROUPS,
    REVERSE,
    STEPS,
    AclEntry,
    FenceAcl,
    Observed,
    Owner,
    SwitchoverRecord,
    decide,
    proof,
    writer_fence,
)

FLOW = "A->B"
RUNNING = Observed(flow_runs=True, reverse_runs=False, authorizer=True)
SWITCHED = Observed(flow_runs=False, reverse_runs=True, authorizer=True)


def _record(*done: str) -> SwitchoverRecord:
    record = SwitchoverRecord(FLOW, started=100.0)
    for i, step in enumerate(done):
        record = record.after(step, 100.0 + i, 101.0 + i)
    return record


def test_a_fresh_switchover_starts_by_fencing_the_writers() -> None:
    decision = decide(FLOW, None, RUNNING, now=50.0)
    assert (decision.action, decision.step, decision.resumed) == ("step", FENCE, False)
    assert decision.record == SwitchoverRecord(FLOW, started=50.0)


@pytest.mark.parametrize("count", range(len(STEPS)))
def test_a_switchover_cut_after_a_step_resumes_at_the_next(count: int) -> None:
    record = _record(*STEPS[:count])
    # Observed as it is mid-way: the flows change only in the last step.
    decision = decide(FLOW, record, RUNNING, now=200.0)
    assert (decision.action, decision.step, decision.resumed) == ("step", STEPS[count], True)
    assert decision.record == record  # its times and data are kept


def test_after_the_last_step_the_switchover_is_done_and_says_so_when_run_again() -> None:
    record = _record(*STEPS)
    assert record.state == "done" and record.next_step is None
    decision = decide(FLOW, record, SWITCHED, now=300.0)
    assert decision.action == "done"
    assert decision.sentence == "A->B was switched over already"


def test_a_finished_switchover_switched_back_since_starts_afresh() -> None:
    decision = decide(FLOW, _record(*STEPS), RUNNING, now=400.0)
    assert (decision.action, decision.step) == ("step", FENCE)
    assert decision.record is not None and decision.record.started == 400.0


def test_rollback_takes_back_an_unfinished_switchover_only() -> None:
    cut = _record(FENCE, DRAIN)
    decision = decide(FLOW, cut, RUNNING, now=1.0, rollback=True)
    assert (decision.action, decision.record) == ("rollback", cut)
    assert cut.rolled_back().state == "rolled_back"
    for record in (None, _record(*STEPS), cut.rolled_back()):
        refused = decide(FLOW, record, RUNNING, now=1.0, rollback=True)
        assert refused.action == "refuse"
        assert refused.sentence == "no switchover of A->B is under way to roll back"
    # A rolled back switchover starts afresh when run again.
    assert decide(FLOW, cut.rolled_back(), RUNNING, now=2.0).step == FENCE


def test_without_an_authorizer_it_is_refused_unless_the_writers_are_stopped() -> None:
    bare = Observed(flow_runs=True, reverse_runs=False, authorizer=False)
    refused = decide(FLOW, None, bare, now=1.0)
    assert refused.action == "refuse"
    assert refused.sentence == (
        "cluster A has no ACL authorizer, so ferry cannot fence the writers of A->B's topics "
        "there; stop them yourself and run again with --writers-stopped"
    )
    going = decide(FLOW, None, bare, now=1.0, writers_stopped=True)
    assert (going.action, going.step) == ("step", FENCE)
    assert going.record is not None and going.record.writers_stopped


def test_a_flow_that_does_not_run_or_runs_beside_its_reverse_is_refused() -> None:
    off = decide(FLOW, None, Observed(False, False, True), now=1.0)
    assert off.sentence == (
        "flow A->B does not run (neither the config file nor its control record enables it): "
        "nothing to switch over"
    )
    both = decide(FLOW, None, Observed(True, True, True), now=1.0)
    assert both.sentence == (
        "flow B->A runs beside A->B: a switchover needs B->A off (set B->A.enabled = false)"
    )


def test_the_record_survives_its_wire_encoding() -> None:
    record = _record(FENCE, DRAIN).after(
        GROUPS,
        5.0,
        6.0,
        fence=(FenceAcl("orders", "User:alice"),),
        writers=(("orders", "User:alice"),),
        window=(("orders", 0, 3, 9),),
    )
    assert SwitchoverRecord.from_bytes(record.to_bytes()) == record
    with pytest.raises(ValueError, match="not a switchover record"):
        SwitchoverRecord.from_bytes(b'{"flow": "A->B"}')
    assert record.after(REVERSE, 7.0, 8.0).state == "done"


def test_a_switchover_another_process_is_at_work_on_is_refused_unless_forced() -> None:
    cut = _record(FENCE)
    busy = Observed(True, False, True, elsewhere="pid 7 on host dr-2, its claim running until T")
    for rollback in (False, True):  # nor rolled back under its feet
        refused = decide(FLOW, cut, busy, now=1.0, rollback=rollback)
        assert refused.action == "refuse"
        assert refused.sentence == (
            "a switchover of A->B is under way in another process (pid 7 on host dr-2, its "
            "claim running until T): wait for it to end, or, if that process is gone, run "
            "again with --force"
        )
    forced = decide(FLOW, cut, busy, now=1.0, force=True)
    assert (forced.action, forced.step, forced.resumed) == ("step", DRAIN, True)
    # A finished one is not "at work": a new switchover may start.
    assert decide(FLOW, _record(*STEPS), busy, now=1.0).step == FENCE


def test_the_owner_survives_the_wire_and_older_records_read_without_one() -> None:
    owned = _record(FENCE).after(DRAIN, 2.0, 3.0, owner=Owner("dr-1", 4711, 999.5))
    assert SwitchoverRecord.from_bytes(owned.to_bytes()) == owned
    older = json.loads(_record(FENCE).to_bytes())
    del older["owner"]  # written before records named their owner
    assert SwitchoverRecord.from_bytes(json.dumps(older).encode()).owner is None


def test_only_a_live_process_with_an_unexpired_claim_counts_as_another() -> None:
    here, me = socket.gethostname(), os.getpid()
    gone = _unused_pid()
    assert elsewhere(None, 10.0) is None
    assert elsewhere(Owner(here, me, 100.0), 10.0) is None  # this process
    assert elsewhere(Owner(here, gone, 100.0), 10.0) is None  # killed on this host
    assert elsewhere(Owner("dr-2", 7, 5.0), 10.0) is None  # its claim ran out
    other = elsewhere(Owner("dr-2", 7, 100.0), 10.0)  # another host: trusted till the claim ends
    assert other == "pid 7 on host dr-2, its claim running until 1970-01-01T00:01:40Z"
    assert elsewhere(Owner(here, os.getppid(), 100.0), 10.0) is not None  # alive here


def _unused_pid() -> int:
    pid = 4_000_000
    while psutil.pid_exists(pid):
        pid += 1
    return pid


def _allow(
    name: str, principal: str, operation: str = "WRITE", pattern: str = "LITERAL"
) -> AclEntry:
    return AclEntry(pattern, name, principal, operation, "ALLOW")


def test_the_fence_denies_each_writer_but_ferry_by_literal_prefixed_and_any_topic_acls() -> None:
    acls = [
        _allow("orders", "User:alice"),
        _allow("ord", "User:bob", "ALL", "PREFIXED"),
        _allow("*", "User:carol"),
        _allow("orders", "User:ferry", "ALL"),
        _allow("orders", "User:dave", "READ"),  # a reader is no writer
        _allow("payments", "User:erin"),  # not a fenced topic
        AclEntry("LITERAL", "orders", "User:carol", "WRITE", "DENY"),  # denied already
    ]
    fence = writer_fence(acls, ["orders"], "User:ferry", "A")
    assert fence.refusal is None
    assert fence.acls == (FenceAcl("orders", "User:alice"), FenceAcl("orders", "User:bob"))
    assert fence.writers == (
        ("orders", "User:alice"),
        ("orders", "User:bob"),
        ("orders", "User:carol"),
    )


def test_a_deny_this_switchover_recorded_before_a_kill_stays_its_own_to_take_back() -> None:
    # A run killed between creating its DENY and recording the step: run again, the DENY
    # exists; it is still the fence's (else a rollback would leave alice fenced for good).
    acls = [
        _allow("orders", "User:alice"),
        _allow("orders", "User:bob"),
        AclEntry("LITERAL", "orders", "User:alice", "WRITE", "DENY"),  # the killed run's
        AclEntry("LITERAL", "orders", "User:bob", "WRITE", "DENY"),  # the operator's
    ]
    ours = [FenceAcl("orders", "User:alice")]
    fence = writer_fence(acls, ["orders"], "User:ferry", "A", ours=ours)
    assert fence.acls == (FenceAcl("orders", "User:alice"),)
    assert fence.writers == (("orders", "User:alice"), ("orders", "User:bob"))
    assert writer_fence(acls, ["orders"], "User:ferry", "A").acls == ()


def test_the_fence_is_refused_where_everyone_may_write() -> None:
    fence = writer_fence([_allow("orders", "User:*")], ["orders"], "User:ferry", "A")
    assert fence.acls == ()
    assert fence.refusal is not None and fence.refusal.startswith(
        "topic orders on A: every principal may write it"
    )


def test_the_proof_counts_records_copies_missing_and_duplicates() -> None:
    window = [("orders", 0, 10, 14), ("orders", 1, 0, 2), ("refunds", 0, 5, 5)]
    on_source = {("orders", 0): ["a", "b", "c", "d"], ("orders", 1): ["e", "f"]}
    copied = {("orders", 0): ["a", "b", "b", "c", "d", "x"], ("orders", 1): ["e"]}
    orders, refunds = proof(window, on_source, copied)
    assert (orders.records, orders.copies, orders.missing, orders.duplicates) == (6, 6, 1, 1)
    assert (refunds.records, refunds.copies, refunds.missing) == (0, 0, 0)
    assert orders.partitions[1] == {
        "partition": 1,
        "start": 0,
        "end": 2,
        "records": 2,
        "copies": 1,
        "missing": 1,
        "duplicates": 0,
    }


def test_a_control_record_turns_a_flow_on_or_off_whatever_the_file_says() -> None:
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers=f"{a}:9092") for a in "AB"}
    config = FerryConfig(
        clusters=clusters,
        flows=(
            FlowConfig(source="A", target="B", enabled=True),
            FlowConfig(source="B", target="A"),
        ),
    )
    assert effective_config(config, {}) is config
    switched = effective_config(
        config, {"A->B": FlowControl().enable(False), "B->A": FlowControl().enable(True)}
    )
    assert [f.name for f in switched.enabled_flows] == ["B->A"]
    assert FlowControl().enable(None).empty and not FlowControl().enable(False).empty
    assert FlowControl.from_bytes(FlowControl().enable(True).to_bytes()).enabled is True
    # Records written before `enabled` existed read as "as the file says".
    assert FlowControl.from_bytes(b'{"added": [], "removed": [], "paused": true}').enabled is None
