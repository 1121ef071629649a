"""Exactly-once's pure rules: where a range resumes, which id fences which producer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.engine.copy.transactional import (
    HEAD_START_TASK,
    TransactionalSettings,
    resume_at,
    task_transactional_id,
)
from ferry.engine.copy.types import EARLIEST, CopyContext

CTX = CopyContext("A", "a:1", "ida", "B", "b:1", "idb")


def test_a_replayed_batch_resumes_at_the_committed_progress() -> None:
    assert resume_at(100, 150) == 150  # the batch's first half committed before a crash
    assert resume_at(100, 200) == 200  # all of it: nothing left to copy in [100, 200)
    assert resume_at(EARLIEST, 40) == 40  # Spark's checkpoint lost: the target knows


def test_progress_behind_the_plan_or_unknown_is_ignored() -> None:
    assert resume_at(100, 60) == 100  # expired or stale offsets never cause a re-copy
    assert resume_at(100, None) == 100
    assert resume_at(100, -1001) == 100  # OFFSET_INVALID: nothing committed yet
    assert resume_at(EARLIEST, None) == EARLIEST


@given(st.integers(-2, 10**9), st.one_of(st.none(), st.integers(-1001, 10**9)))
def test_resume_never_goes_behind_the_plan(planned: int, committed: int | None) -> None:
    start = resume_at(planned, committed)
    assert start >= planned
    assert start in (planned, committed)


def test_one_transactional_id_per_flow_task_slot_and_parity() -> None:
    ids = {
        task_transactional_id(s, t, task, parity)
        for s, t in (("A", "B"), ("B", "A"))
        for task in ("0", "1", "10", HEAD_START_TASK)
        for parity in (0, 1)
    }
    assert len(ids) == 16
    assert task_transactional_id("A", "B", "3") == "ferry:A->B:task/3"
    assert task_transactional_id("A", "B", "3", 1) == "ferry:A->B:task/3/1"


TOPIC_NAMES = st.text(
    st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="._-"), min_size=1
)


@given(TOPIC_NAMES, st.integers(0, 10_000), st.integers(0, 10_000), st.sampled_from([0, 1]))
def test_no_slot_id_is_an_id_an_older_ferry_gave_a_partition(
    topic: str, partition: int, slot: int, parity: int
) -> None:
    # Older versions named a partition's producers ferry:A->B:<topic>:<partition>[:1]; '/'
    # is never in a topic name, so a slot's id is never one of them.
    older = {f"ferry:A->B:{topic}:{partition}", f"ferry:A->B:{topic}:{partition}:1"}
    assert task_transactional_id("A", "B", str(slot), parity) not in older
    assert task_transactional_id("A", "B", str(slot), parity).startswith("ferry:A->B:")


def test_message_timeout_never_exceeds_the_transaction_timeout() -> None:
    settings = TransactionalSettings({"message.timeout.ms": "120000", "linger.ms": "10"}, CTX)
    conf = settings.for_task("2")
    assert int(conf["message.timeout.ms"]) <= int(conf["transaction.timeout.ms"])
    assert conf["transactional.id"] == "ferry:A->B:task/2"
    assert conf["linger.ms"] == "10"
    assert [c["transactional.id"] for c in settings.for_task_parities("2")] == [
        "ferry:A->B:task/2",
        "ferry:A->B:task/2/1",
    ]
