"""Source topic ids: a topic deleted and created again told from the one ferry copied.

Kafka gives a topic an id (a UUID) when it is created; deleted and created again under the
same name, it gets a new id and its offsets start at 0 again. ferry commits the id beside each
position (the offset commit's metadata, `engine/copy/progress.py`), so a position is always
read together with the topic it is a position in. Before planning, the planner compares the
source's ids now with the ids committed (`changed_partitions`, pure): a different id means
that partition's position points into a topic that is gone. Were that missed, once the new
topic holds more records than the old position, copying would resume in the middle of it and
skip its first records; so the partition is copied from the new topic's start, and said,
naming both ids. Partitions already committed with the new id keep their positions.

An id not known (a position committed by an older ferry or by hand, or the source's answer
missing) is never taken for a change: the older check still holds there (a position beyond
the source's end is a recreated topic), and the next commit records the id.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, TopicCollection

from ferry.kafka.admin_batches import MAX_TOPICS_PER_METADATA_REQUEST, batches

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = [
    "SourceTopics",
    "changed_partitions",
    "describe_source_topics",
    "ends_in_new_topics",
    "source_topic_ids",
]

TP = tuple[str, int]
_UNKNOWN_TOPIC = KafkaError.UNKNOWN_TOPIC_OR_PART


def changed_partitions(
    committed: Mapping[TP, tuple[int, str]], current: Mapping[str, str]
) -> dict[TP, tuple[str, str]]:
    """{(topic, partition): (committed id, id now)} for each partition whose position was
    committed with an id that differs from its topic's id now. Unknown ids ("") never count.

    By partition, not by topic: a topic's partitions need not all have moved on together. A
    task that met the new topic first copies its partitions from the new topic's start and
    commits them with the new id, while another partition of the same topic, in a task that
    ended before it met the new topic, still holds a position in the old one. Setting the whole
    topic back would copy the first partitions' new records a second time."""
    changed: dict[TP, tuple[str, str]] = {}
    for (topic, partition), (_offset, old) in sorted(committed.items()):
        new = current.get(topic, "")
        if old and new and old != new:
            changed[(topic, partition)] = (old, new)
    return changed


def ends_in_new_topics(
    start: Mapping[TP, int],
    committed: Mapping[TP, tuple[int, str]],
    changed: Mapping[TP, tuple[str, str]],
) -> dict[TP, int]:
    """Where a bounded batch ends each planned partition of a topic deleted and created again:
    a partition whose position was in the old topic (`changed`) at 0; one already committed
    with the new id (a leased run copies the new topic too) at its position there."""
    new_ids = {topic: new for (topic, _p), (_old, new) in changed.items()}
    moved: dict[TP, int] = {}
    for tp in start:
        if tp[0] not in new_ids:
            continue
        offset, topic_id = committed.get(tp, (0, ""))
        moved[tp] = offset if tp not in changed and topic_id == new_ids[tp[0]] else 0
    return moved


@dataclass(frozen=True)
class SourceTopics:
    """What the source said of some topics: their ids (as text), and those it says do not
    exist (UNKNOWN_TOPIC_OR_PART: deleted since they were planned). A topic in neither did not
    get an answer in time, or may not be described."""

    ids: dict[str, str]
    gone: frozenset[str]


def source_topic_ids(admin: AdminClient, topics: Iterable[str], timeout: float) -> dict[str, str]:
    """Each topic's id as `admin`'s cluster says, as text; a topic it does not describe (gone,
    not allowed, no answer in time) is left out: its id is not known (`describe_source_topics`
    says which are gone)."""
    return describe_source_topics(admin, topics, timeout).ids


def describe_source_topics(
    admin: AdminClient, topics: Iterable[str], timeout: float
) -> SourceTopics:
    """The topics' ids, and which of them the source says do not exist.

    librdkafka sends DescribeTopics to the broker its metadata last named as controller (in
    KRaft, any live broker the last metadata answer picked). When that broker has gone down
    since, every describe waits out its timeout until something refreshes the metadata, which
    for a client that asks nothing else can take minutes: so after a first try of half the
    time, the metadata is read again and what was not described is asked once more."""
    deadline = time.monotonic() + timeout
    wanted = sorted(topics)
    ids, gone = _describe(admin, wanted, timeout / 2)
    missing = [t for t in wanted if t not in ids and t not in gone]
    if missing and time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):  # the retry below says what it can
            admin.list_topics(timeout=max(0.1, (deadline - time.monotonic()) / 2))
        more, more_gone = _describe(admin, missing, max(0.1, deadline - time.monotonic()))
        ids.update(more)
        gone |= more_gone
    return SourceTopics(ids, frozenset(gone))


def _describe(
    admin: AdminClient, topics: list[str], timeout: float
) -> tuple[dict[str, str], set[str]]:
    ids: dict[str, str] = {}
    gone: set[str] = set()
    for batch in batches(topics, MAX_TOPICS_PER_METADATA_REQUEST):
        try:
            futures = admin.describe_topics(TopicCollection(batch), request_timeout=timeout)
        except KafkaException:
            continue
        for name, future in futures.items():
            try:
                description = future.result(timeout)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() == _UNKNOWN_TOPIC:
                    gone.add(name)
                continue
            except Exception:
                continue
            if description.topic_id is not None:
                ids[name] = str(description.topic_id)
    return ids, gone
