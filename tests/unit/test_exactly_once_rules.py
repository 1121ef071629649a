"""Exactly-once's pure rules: where a range resumes, which id fences which producer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.engine.copy.transactional import TransactionalSettings, resume_at, transactional_id
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


def test_one_transactional_id_per_flow_and_source_partition() -> None:
    ids = {
        transactional_id(s, t, topic, p)
        for s, t in (("A", "B"), ("B", "A"))
        for topic in ("orders", "orders-1")
        for p in (0, 1)
    }
    assert len(ids) == 8
    assert transactional_id("A", "B", "orders", 3) == "ferry:A->B:orders:3"


@given(
    st.text(
        st.characters(whitelist_categories=("Ll", "Nd"), whitelist_characters="._-"), min_size=1
    ),
    st.integers(0, 10_000),
    st.text(
        st.characters(whitelist_categories=("Ll", "Nd"), whitelist_characters="._-"), min_size=1
    ),
    st.integers(0, 10_000),
)
def test_the_two_parities_of_a_partition_never_share_an_id_with_another_partition(
    topic: str, partition: int, other_topic: str, other_partition: int
) -> None:
    ids = {(topic, partition, p): transactional_id("A", "B", topic, partition, p) for p in (0, 1)}
    others = {transactional_id("A", "B", other_topic, other_partition, p) for p in (0, 1)}
    assert ids[(topic, partition, 0)] != ids[(topic, partition, 1)]
    if (topic, partition) != (other_topic, other_partition):
        assert not set(ids.values()) & others


def test_parity_zero_keeps_the_single_producer_id_so_older_writers_are_fenced() -> None:
    assert transactional_id("A", "B", "orders", 3, 0) == "ferry:A->B:orders:3"
    assert transactional_id("A", "B", "orders", 3, 1) == "ferry:A->B:orders:3:1"


def test_message_timeout_never_exceeds_the_transaction_timeout() -> None:
    settings = TransactionalSettings({"message.timeout.ms": "120000", "linger.ms": "10"}, CTX)
    conf = settings.for_partition("orders", 2)
    assert int(conf["message.timeout.ms"]) <= int(conf["transaction.timeout.ms"])
    assert conf["transactional.id"] == "ferry:A->B:orders:2"
    assert conf["linger.ms"] == "10"
