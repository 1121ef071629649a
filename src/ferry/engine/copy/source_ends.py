"""The source's end of a partition as it is now, asked of its leader (not librdkafka's cache)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition

from ferry.engine.copy.types import CopyContext
from ferry.errors import KafkaUnavailableError
from ferry.kafka.errors import Endpoint, kafka_errors

__all__ = ["high_watermarks"]

TIMEOUT_SECONDS = 10.0


def high_watermarks(
    consumer: Any, partitions: list[tuple[str, int]], ctx: CopyContext
) -> dict[tuple[str, int], int]:
    """Each partition's high watermark (the offset its next record gets) on the source."""
    ends: dict[tuple[str, int], int] = {}
    for topic, partition in partitions:
        source = Endpoint(ctx.source_alias, ctx.source_bootstrap)
        with kafka_errors(source, f"read the end of {topic} partition {partition}"):
            answer = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS, cached=False
            )
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
