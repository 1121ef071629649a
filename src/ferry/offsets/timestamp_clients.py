"""The clients behind `consumer_timestamps`: one deadline per operation, reads to an end.

While a cluster does not answer (`UNREACHABLE_CODES`), a call is asked again every 0.1 s
(ferry's retry helper with a fixed pause) until the operation's deadline, then a TimeoutError
says what did not finish. Every other error reaches the application as librdkafka raised it
(`KafkaException`): this is a library for applications, which handle Kafka's own errors.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.errors import FerryError, KafkaUnavailableError
from ferry.kafka import clients
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of
from ferry.kafka.retry import retry_unavailable

T = TypeVar("T")

# Asked again this often while a cluster does not answer, until the operation's deadline.
RETRY_SECONDS = 0.1


class Deadline:
    """One timeout for a whole operation, and the TimeoutError saying what did not finish."""

    def __init__(self, timeout: float, what: str) -> None:
        self.timeout = timeout
        self.what = what
        self.end = time.monotonic() + timeout

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self, detail: str = "") -> TimeoutError:
        suffix = f" (last error: {detail})" if detail else ""
        return TimeoutError(f"{self.what}: no answer within {self.timeout}s{suffix}")

    def retry(self, call: Callable[[float], T]) -> T:
        """`call(seconds_left)`, asked again every RETRY_SECONDS while the cluster does not
        answer (`UNREACHABLE_CODES`); a TimeoutError at the deadline, naming the last error."""

        def attempt() -> T:
            try:
                return call(max(self.left(), 0.001))
            except KafkaException as exc:  # any other error reaches the application unchanged
                error = kafka_error_of(exc)
                if error is None or error.code() not in UNREACHABLE_CODES:
                    raise
                # Only for `retry_unavailable` to ask again; never leaves this method.
                raise KafkaUnavailableError("", self.what, error.str()) from exc

        if self.left() <= 0:
            raise self.expired()
        try:
            return retry_unavailable(
                attempt,
                on_retry=lambda _error, _delay: None,
                sleep=time.sleep,
                max_wait=self.left(),
                first_delay=RETRY_SECONDS,
                max_delay=RETRY_SECONDS,
            )
        except KafkaUnavailableError as exc:
            raise self.expired(exc.detail) from None


def bootstrap_of(config: Mapping[str, Any]) -> str:
    return str(config.get("bootstrap.servers", "?"))


def reader(config: Mapping[str, Any]) -> Consumer:
    return clients.consumer(
        {
            **config,
            "group.id": f"ferry-timestamps-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "allow.auto.create.topics": False,
        }
    )


def timestamps_producer(config: Mapping[str, Any]) -> Producer:
    # No auto-creation: a topic deleted under us would come back uncompacted, and grow forever.
    settings = {"enable.idempotence": True, "acks": "all", "allow.auto.create.topics": False}
    return clients.producer({**config, **settings})


def partition_bounds(
    consumer: Consumer, topic: str, deadline: Deadline
) -> dict[int, tuple[int, int]]:
    """Low and high watermark of each partition of `topic`; {} if it does not exist."""

    def metadata(left: float) -> Any:
        md = consumer.list_topics(topic, timeout=left).topics.get(topic)
        if md is not None and md.error is not None:
            if md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise KafkaException(md.error)  # retried if transient (e.g. just created)
        return md

    md = deadline.retry(metadata)
    if md is None:
        return {}
    return {p: watermarks(consumer, topic, p, deadline) for p in md.partitions}


def watermarks(
    consumer: Consumer, topic: str, partition: int, deadline: Deadline
) -> tuple[int, int]:
    def call(left: float) -> tuple[int, int]:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), left)
        return int(low), int(high)

    return deadline.retry(call)


def read_records(
    consumer: Consumer,
    topic: str,
    start: dict[int, int],
    end: dict[int, int],
    deadline: Deadline,
) -> Iterator[Message]:
    """The records of `topic` from `start` up to `end` (exclusive), in order per partition.

    Stops at `end` even if more arrived since, so a caller can resume exactly there. Compacted
    gaps just before `end` are covered by the end-of-partition event."""
    return read_partitions(
        consumer,
        {(topic, p): o for p, o in start.items()},
        {(topic, p): o for p, o in end.items()},
        deadline,
    )


def read_partitions(
    consumer: Consumer,
    start: dict[tuple[str, int], int],
    end: dict[tuple[str, int], int],
    deadline: Deadline,
) -> Iterator[Message]:
    """`read_records` of many topics at once: the records of each (topic, partition) from
    `start` up to `end`, in order per partition, every partition assigned together."""
    pending = {tp for tp in end if end[tp] > start.get(tp, 0)}
    if not pending:
        return
    consumer.assign([TopicPartition(t, p, start.get((t, p), 0)) for t, p in sorted(pending)])
    detail = ""
    try:
        while pending:
            if deadline.left() <= 0:
                raise deadline.expired(detail)
            for msg in consumer.consume(500, min(deadline.left(), 0.5)):
                error, tp = msg.error(), (str(msg.topic()), msg.partition() or 0)
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(tp)  # at the current end, which is at or past `end`
                    elif error.code() in UNREACHABLE_CODES and not error.fatal():
                        detail = error.str()  # the client retries by itself
                    elif error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        # The bounds were just read from this topic's metadata: a broker that
                        # does not know it yet (a topic just created) is behind, not right.
                        detail = error.str()
                    else:
                        raise KafkaException(error)
                    continue
                offset = msg.offset()
                assert msg.partition() is not None and offset is not None
                if tp in pending and offset < end[tp]:
                    yield msg
                if offset + 1 >= end[tp]:
                    pending.discard(tp)
    finally:
        consumer.unassign()


def ensure_topic(
    admin: AdminClient, topic: str, replication_factor: int | None, deadline: Deadline
) -> None:
    """Create `topic` (compacted, one partition) unless it exists."""
    md = deadline.retry(lambda left: admin.list_topics(timeout=left))
    if topic in md.topics:
        return
    factor = replication_factor or min(3, len(md.brokers))
    new = NewTopic(
        topic, num_partitions=1, replication_factor=factor, config={"cleanup.policy": "compact"}
    )
    try:
        admin.create_topics([new])[topic].result(deadline.left())
    except KafkaException as exc:  # reaches the application unchanged, unless already done
        error = kafka_error_of(exc)
        if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise  # created meanwhile by another client is fine
    except TimeoutError:  # a future's result() times out like concurrent.futures
        raise deadline.expired("creating the topic") from None


def flush(producer: Producer, topic: str, failures: list[str], deadline: Deadline) -> None:
    remaining = producer.flush(deadline.left())
    if failures:
        raise FerryError(f"could not write to {topic}: {failures[0]}")
    if remaining:
        raise deadline.expired(f"{remaining} records to {topic} not acknowledged")
