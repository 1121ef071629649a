"""Errors raised inside Spark travel to the driver as text: `[ferry-error:<base64 json>]`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.errors import (
    FerryError,
    KafkaUnavailableError,
    RefusedError,
    ReplicationError,
    error_from_text,
    error_to_text,
    readable,
)

FULL = ReplicationError(
    "record is 2000000 bytes; target accepts at most 1048588",
    cluster="A",
    topic="orders",
    partition=3,
    offset=42,
    fix="raise max.message.bytes of topic A.orders on B to at least 2000000, then rerun",
)
BARE = ReplicationError("topic vanished", cluster="A", topic="orders")
UNAVAILABLE = KafkaUnavailableError("B", "b1:9092,b2:9092", "timed out after 10 s")
PLAIN = FerryError("something went wrong")
REFUSED = RefusedError(
    "A", "a1:9092", "could not list groups: GROUP_AUTHORIZATION_FAILED", "grant it DESCRIBE"
)

FIELDS = {
    ReplicationError: ("reason", "cluster", "topic", "partition", "offset", "fix"),
    KafkaUnavailableError: ("cluster", "bootstrap", "detail"),
    RefusedError: ("cluster", "bootstrap", "detail", "fix"),
    FerryError: (),
}


def assert_same(got: FerryError | None, want: FerryError) -> None:
    assert got is not None
    assert type(got) is type(want)
    assert str(got) == str(want)
    for name in FIELDS[type(want)]:
        assert getattr(got, name) == getattr(want, name), name


def java_trace(message: str) -> str:
    """What the driver sees: a Spark failure wrapping a Python worker traceback."""
    return "\n".join(
        [
            "org.apache.spark.sql.streaming.StreamingQueryException: Job aborted due to stage "
            "failure: Task 1 in stage 7.0 failed 1 times, most recent failure: Lost task 1.0 "
            "in stage 7.0 (TID 21) (127.0.0.1 executor driver): "
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):",
            '  File "/work/main/src/ferry/engine/spark_sink.py", line 69, in write',
            "    raise RuntimeError(error_to_text(exc)) from None",
            f"RuntimeError: {message}",
            "",
            "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException"
            "(PythonRunner.scala:572)",
            "\tat org.apache.spark.scheduler.Task.run(Task.scala:141)",
            "\tat java.base/java.lang.Thread.run(Thread.java:1583)",
            "",
            "Driver stacktrace:",
            "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages"
            "(DAGScheduler.scala:2856)",
            "=== Streaming Query ===",
            "Identifier: ferry-B->A [id = 1f0c, runId = 9e2a]",
        ]
    )


@pytest.mark.parametrize(
    "error", [FULL, BARE, UNAVAILABLE, REFUSED, PLAIN], ids=lambda e: type(e).__name__
)
def test_round_trip(error: FerryError) -> None:
    text = error_to_text(error)
    assert text.startswith(str(error))  # readable before the marker
    assert_same(error_from_text(text), error)


def test_replication_error_without_location_keeps_its_nones() -> None:
    got = error_from_text(error_to_text(BARE))
    assert isinstance(got, ReplicationError)
    assert (got.partition, got.offset, got.fix) == (None, None, None)
    assert str(got) == "cluster A, topic orders: topic vanished"


@pytest.mark.parametrize(
    "error", [FULL, BARE, UNAVAILABLE, REFUSED, PLAIN], ids=lambda e: type(e).__name__
)
def test_marker_survives_a_stack_trace(error: FerryError) -> None:
    assert_same(error_from_text(java_trace(error_to_text(error))), error)


def test_first_marker_wins_when_the_trace_repeats_messages() -> None:
    text = java_trace(error_to_text(UNAVAILABLE)) + "\nCaused by: " + error_to_text(FULL)
    assert_same(error_from_text(text), UNAVAILABLE)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "java.lang.OutOfMemoryError: Java heap space",
        java_trace("ValueError: bad thing"),
        "[ferry-error:]",  # an empty marker is no marker
        "cluster A is unreachable [ferry-error:",  # truncated
    ],
)
def test_text_without_a_marker_gives_none(text: str) -> None:
    assert error_from_text(text) is None


messages = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)


@given(
    messages,
    st.text(min_size=1, max_size=20),
    st.text(min_size=1, max_size=50),
    st.none() | st.integers(0, 10_000),
    st.none() | st.integers(0, 2**63 - 1),
    st.none() | messages,
)
def test_replication_error_round_trips_any_text(message, cluster, topic, partition, offset, fix):
    error = ReplicationError(
        message, cluster=cluster, topic=topic, partition=partition, offset=offset, fix=fix
    )
    assert_same(error_from_text(java_trace(error_to_text(error))), error)


def test_a_marked_error_reads_as_its_message_alone() -> None:
    error = KafkaUnavailableError("B", "127.0.0.1:9", "NOT_COORDINATOR")
    text = f"java.lang.RuntimeException: {error_to_text(error)}"
    assert readable(text) == f"java.lang.RuntimeException: {error}"
    assert "ferry-error" not in readable(text)
    assert readable("nothing marked") == "nothing marked"
