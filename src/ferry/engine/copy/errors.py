"""What a failed copy says: the copy loops' errors, worded once for both loops.

Pure code (no clients). The Python loop (python_loop.py) and the native one (native_loop.py)
both end a failed copy with one of these, so a user reads the same message, naming cluster,
topic, partition, offset and the fix, whichever loop ran.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from ferry.engine.copy.ack_wait import GaveUp
from ferry.engine.copy.types import CopyContext, CopyRange
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.errors import UNREACHABLE_CODES

__all__ = [
    "beyond_end_error",
    "consume_error",
    "delivery_error",
    "fenced",
    "fenced_error",
    "produce_error",
    "producer_error",
    "retry_later",
    "size_error",
    "stall_error",
    "unacknowledged_error",
    "unacknowledged_text",
]

_RERUN = "see the error above; rerun once it is fixed"
# A newer producer with the same transactional id started (librdkafka's own code, then the
# broker's two): another `ferry run` of the flow, or a retry of the same task.
FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)
FENCED_WHY = (
    "a newer producer with the same transactional id started (another ferry run of this "
    "flow, or a retry of this task)"
)


def retry_later(err: KafkaError) -> bool:
    """Errors a new producer (and a replayed batch) gets past: the cluster was away, or the
    producer's state is lost (fatal idempotence error, a fenced or aborted transaction)."""
    return (
        err.code() in UNREACHABLE_CODES
        or err.code() == KafkaError._MSG_TIMED_OUT
        or err.fatal()
        or err.txn_requires_abort()
    )


def fenced(err: KafkaError) -> bool:
    return err.code() in FENCED_CODES


def fenced_error(detail: str, ctx: CopyContext) -> KafkaUnavailableError:
    """A producer fenced by a newer one of its transactional id: retried, and said as such."""
    return KafkaUnavailableError(
        ctx.target_alias,
        ctx.target_bootstrap,
        f"{detail}: {FENCED_WHY}; nothing of the open transaction is visible to "
        "read_committed consumers; retrying",
        "fenced ferry's transactional producer",
    )


def producer_error(error: KafkaError | None, text: str, ctx: CopyContext) -> Exception | None:
    """The ferry error for an exception a target producer raised from poll() or flush() (a
    fenced or otherwise fatal producer raises its error from every call); None where it is
    not one a new producer gets past. A raw librdkafka exception would reach `ferry run` with
    no ferry error in it, and stop the run as if it were a fault of the data."""
    if error is None or not retry_later(error):
        return None
    if fenced(error):
        return fenced_error(f"{error.name()}: {error.str()}", ctx)
    return KafkaUnavailableError(
        ctx.target_alias, ctx.target_bootstrap, f"{error.name()}: {error.str()} ({text})"
    )


def consume_error(
    err: KafkaError, topic: str | None, partition: int | None, offset: int | None, ctx: CopyContext
) -> ReplicationError | None:
    """None for transient fetch errors (librdkafka retries them); else the halt, located."""
    if err.code() in UNREACHABLE_CODES and not err.fatal():
        return None
    source = ctx.source_alias
    fixes = {
        KafkaError.TOPIC_AUTHORIZATION_FAILED: (
            f"grant ferry's principal READ on topic {topic} in {source}"
        ),
        KafkaError.UNKNOWN_TOPIC_OR_PART: (
            "the source topic was deleted while being copied; rerun to continue with the rest"
        ),
    }
    return ReplicationError(
        f"reading failed: {err.name()}: {err.str()}.",
        cluster=ctx.source_alias,
        topic=topic or "?",
        partition=partition,
        offset=offset if offset is not None and offset >= 0 else None,
        fix=fixes.get(err.code(), _RERUN),
    )


def size_error(size: int, r: CopyRange, offset: int, ctx: CopyContext) -> ReplicationError:
    return ReplicationError(
        f"record is {size} bytes (uncompressed, with ferry's header); target topic "
        f"{r.remote_topic} on {ctx.target_alias} accepts at most {r.max_message_bytes} "
        f"(max.message.bytes). Nothing past it in this partition was copied.",
        cluster=ctx.source_alias,
        topic=r.topic,
        partition=r.partition,
        offset=offset,
        fix=f"raise max.message.bytes of topic {r.remote_topic} on {ctx.target_alias} "
        f"to at least {size} (and the broker's message.max.bytes if lower), then rerun",
    )


def produce_error(
    error: KafkaError | None, text: str, r: CopyRange, offset: int, ctx: CopyContext
) -> Exception:
    """produce() refused a copy; `text` describes it when librdkafka gave no KafkaError."""
    if error is not None and error.code() != KafkaError.MSG_SIZE_TOO_LARGE and retry_later(error):
        return KafkaUnavailableError(
            ctx.target_alias,
            ctx.target_bootstrap,
            f"{error.name()}: {error.str()} (copying {r.topic} partition {r.partition})",
        )
    if error is not None:
        text = f"{error.name()}: {error.str()}"
    fix = _RERUN
    if error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        fix = f"raise {ctx.target_alias}.producer.message.max.bytes above the record's size"
    return ReplicationError(
        f"could not copy to {r.remote_topic} on {ctx.target_alias}: {text}.",
        cluster=ctx.source_alias,
        topic=r.topic,
        partition=r.partition,
        offset=offset,
        fix=fix,
    )


def delivery_error(
    remote_topic: str,
    partition: int,
    upstream: int,
    err: KafkaError,
    refused: int,
    source_topic: str,
    ctx: CopyContext,
) -> Exception:
    """The target refused `refused` copies; `upstream` is the source offset of the first."""
    target = ctx.target_alias
    fixes = {
        KafkaError.MSG_SIZE_TOO_LARGE: (
            f"raise max.message.bytes of topic {remote_topic} on {target}, "
            f"or lower {target}.producer.batch.size below it"
        ),
        KafkaError.TOPIC_AUTHORIZATION_FAILED: (
            f"grant ferry's principal WRITE on topic {remote_topic} in {target}"
        ),
        KafkaError.CLUSTER_AUTHORIZATION_FAILED: (
            f"grant ferry's principal IDEMPOTENT_WRITE on cluster {target}"
        ),
        KafkaError.UNKNOWN_TOPIC_OR_PART: (
            f"topic {remote_topic} vanished from {target}; rerun to recreate it"
        ),
    }
    if err.code() not in fixes and retry_later(err):
        return KafkaUnavailableError(
            ctx.target_alias,
            ctx.target_bootstrap,
            f"{err.name()}: {err.str()} (topic {remote_topic})",
        )
    return ReplicationError(
        f"target {target} refused the copy into {remote_topic} (partition {partition}): "
        f"{err.name()}: {err.str()}; {refused} record(s) refused.",
        cluster=ctx.source_alias,
        topic=source_topic,
        partition=partition,
        offset=upstream,
        fix=fixes.get(err.code(), _RERUN),
    )


def stall_error(active: int, example_topic: str, ctx: CopyContext) -> KafkaUnavailableError:
    return KafkaUnavailableError(
        ctx.source_alias,
        ctx.source_bootstrap,
        f"no data for {active} partition(s) in {ctx.stall_timeout:.0f}s "
        f"(e.g. {example_topic}); retrying",
    )


def unacknowledged_error(gave_up: GaveUp, ctx: CopyContext) -> KafkaUnavailableError:
    """The target acknowledged none of the batch's outstanding copies for too long, or ferry
    run is stopping (engine/copy/ack_wait.py): they were dropped, the batch is not committed."""
    return KafkaUnavailableError(
        ctx.target_alias,
        ctx.target_bootstrap,
        unacknowledged_text(gave_up, "nothing of this batch is committed"),
        what="did not acknowledge copies",
    )


def unacknowledged_text(gave_up: GaveUp, outcome: str) -> str:
    why = "ferry run is stopping and " if gave_up.stopping else ""
    return (
        f"{why}{gave_up.outstanding} copies got no acknowledgement in {gave_up.seconds:.0f} s; "
        f"{outcome}, the batch is copied again from the last committed position, in order"
    )


def beyond_end_error(
    r: CopyRange, position: int, end: int, ctx: CopyContext
) -> KafkaUnavailableError:
    """ferry's position lies beyond the partition's end: the topic was deleted and created
    again while being copied (or its log was truncated). Copying on from the position would
    skip the new topic's first records, so the copy stops; the task is retried, and its
    retry (or the next plan, by the topic's id) starts the new topic from its beginning."""
    return KafkaUnavailableError(
        ctx.source_alias,
        ctx.source_bootstrap,
        f"{r.topic} partition {r.partition} ends at {end}, below ferry's position {position}: "
        "deleted and created again? copying it again from its start",
        what="changed under the copy",
    )
