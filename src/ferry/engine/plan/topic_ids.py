"""Source topic ids: a topic deleted and created again told from the one ferry copied.

Kafka gives a topic an id (a UUID) when it is created; deleted and created again under the
same name, it gets a new id and its offsets start at 0 again. ferry commits the id beside each
position (the offset commit's metadata, `engine/copy/progress.py`), so a position is always
read together with the topic it is a position in. Before planning, the planner compares the
source's ids now with the ids committed (`changed_topics`, pure): a different id means ferry's
position points into a topic that is gone. Were that missed, once the new topic holds more
records than the old position, copying would resume in the middle of it and skip its first
records; so the new topic is copied from its start, and said, naming both ids.

An id not known (a position committed by an older ferry or by hand, or the source's answer
missing) is never taken for a change: the older check still holds there (a position beyond
the source's end is a recreated topic), and the next commit records the id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException, TopicCollection

from ferry.kafka.admin_batches import MAX_TOPICS_PER_METADATA_REQUEST, batches

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["changed_topics", "source_topic_ids"]

TP = tuple[str, int]


def changed_topics(
    committed: Mapping[TP, tuple[int, str]], current: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """{topic: (committed id, id now)} for each topic one of whose partitions has a position
    committed with an id that differs from the topic's id now. Unknown ids ("") never count."""
    changed: dict[str, tuple[str, str]] = {}
    for (topic, _partition), (_offset, old) in sorted(committed.items()):
        new = current.get(topic, "")
        if old and new and old != new and topic not in changed:
            changed[topic] = (old, new)
    return changed


def source_topic_ids(admin: AdminClient, topics: Iterable[str], timeout: float) -> dict[str, str]:
    """Each topic's id as `admin`'s cluster says, as text; a topic it does not describe (gone,
    not allowed, no answer in time) is left out: its id is not known."""
    ids: dict[str, str] = {}
    for batch in batches(sorted(topics), MAX_TOPICS_PER_METADATA_REQUEST):
        try:
            futures = admin.describe_topics(TopicCollection(batch), request_timeout=timeout)
        except KafkaException:
            continue
        for name, future in futures.items():
            try:
                description = future.result(timeout)
            except Exception:
                continue
            if description.topic_id is not None:
                ids[name] = str(description.topic_id)
    return ids
