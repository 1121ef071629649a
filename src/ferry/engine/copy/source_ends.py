"""The source's end of a partition as it is now, asked of its leader (not librdkafka's cache)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.engine.copy.types import CopyContext
from ferry.errors import KafkaUnavailableError
from ferry.kafka.errors import Endpoint, kafka_error_of, kafka_errors

__all__ = ["high_watermarks"]

TIMEOUT_SECONDS = 10.0


# The source has no such partition now: its topic was deleted (or shrank, which Kafka does not
# do). Not a cluster that does not answer: asking again gives the same answer for good.
GONE = frozenset(
    {KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART}
)


def high_watermarks(
    consumer: Any, partitions: list[tuple[str, int]], ctx: CopyContext
) -> dict[tuple[str, int], int]:
    """Each partition's high watermark (the offset its next record gets) on the source.

    A partition the source does not have now is left out. A lease planned before its topic
    was deleted, and replayed after (a retried task, a restart), must not fail on it for good:
    its position is kept, the copy finds nothing there, and the driver's watch plans the next
    lease without the topic."""
    ends: dict[tuple[str, int], int] = {}
    for topic, partition in partitions:
        source = Endpoint(ctx.source_alias, ctx.source_bootstrap)
        try:
            with kafka_errors(source, f"read the end of {topic} partition {partition}"):
                answer = _watermarks(consumer, topic, partition)
        except _Gone:
            continue
        # None: timed out. Below 0: no offset. Neither may read as an end below ferry's
        # position, which would copy the partition again from its start.
        if answer is None or answer[1] < 0:
            what = (
                f"the leader answered offset {answer[1]}"
                if answer is not None
                else f"no answer within {TIMEOUT_SECONDS:.0f}s"
            )
            raise KafkaUnavailableError(
                ctx.source_alias,
                ctx.source_bootstrap,
                f"could not read the end of {topic} partition {partition}: {what}",
            )
        ends[(topic, partition)] = answer[1]
    return ends


class _Gone(Exception):
    """The source has no such partition now."""


def _watermarks(consumer: Any, topic: str, partition: int) -> tuple[int, int] | None:
    try:
        answer: tuple[int, int] | None = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS, cached=False
        )
    except KafkaException as exc:
        error = kafka_error_of(exc)
        if error is not None and error.code() in GONE:
            raise _Gone from None
        raise
    return answer
