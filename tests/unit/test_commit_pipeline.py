"""The exactly-once commit pipeline: one slice's commit at a time, in order, failures kept."""

from __future__ import annotations

import threading

import pytest

from ferry.engine.copy.commit_pipeline import CommitPipeline


def test_a_commit_starts_only_after_the_previous_one_finished() -> None:
    pipeline = CommitPipeline()
    release = threading.Event()
    events: list[str] = []

    def first() -> None:
        events.append("first started")
        assert release.wait(10), "the test never released the first commit"
        events.append("first done")

    pipeline.submit(first)
    threading.Timer(0.05, release.set).start()
    pipeline.submit(lambda: events.append("second"))  # waits for the first
    pipeline.wait()
    pipeline.close()
    assert events == ["first started", "first done", "second"]


def test_the_caller_copies_on_while_a_commit_runs() -> None:
    pipeline = CommitPipeline()
    release = threading.Event()

    def blocked() -> None:
        release.wait(10)

    pipeline.submit(blocked)
    # submit returned while the commit is still blocked: the next slice can copy meanwhile
    assert not release.is_set()
    release.set()
    pipeline.wait()
    pipeline.close()


def test_a_failed_commit_stops_the_next_one_from_starting() -> None:
    pipeline = CommitPipeline()
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("EndTxn failed for orders partition 3")

    pipeline.submit(fails)
    with pytest.raises(RuntimeError, match="orders partition 3"):
        pipeline.submit(lambda: ran.append("next"))
    pipeline.close()
    assert ran == [], "a slice after a failed commit never commits (its copies would follow a gap)"


def test_wait_raises_the_last_commits_failure_once() -> None:
    pipeline = CommitPipeline()

    def fails() -> None:
        raise RuntimeError("fenced")

    pipeline.submit(fails)
    with pytest.raises(RuntimeError, match="fenced"):
        pipeline.wait()
    pipeline.wait()  # nothing pending any more
    pipeline.close()


def test_close_waits_for_a_running_commit_without_raising() -> None:
    pipeline = CommitPipeline()
    done = threading.Event()

    def slow_failure() -> None:
        done.set()
        raise RuntimeError("late")

    pipeline.submit(slow_failure)
    pipeline.close()
    assert done.is_set()
