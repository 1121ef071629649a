"""Turning librdkafka errors into ferry errors that say where and what to do.

`with kafka_errors(cluster, action, ...):` is the one place a `KafkaException` becomes a ferry
error, chained to the original (whose `KafkaError` keeps `.code()` and `.str()`):

    a code in `done`                      the work is done already: the block ends, quietly
    UNREACHABLE_CODES, or no KafkaError   KafkaUnavailableError (retried with backoff)
    TimeoutError (a future's `result(t)`  KafkaUnavailableError: no answer in time is a
      with no answer within t)              cluster that does not answer, never a crash
    any other code, with a `fix`          ReplicationError at cluster/topic/partition
    any other code, without a `fix`       KafkaUnavailableError (a request about the cluster
                                          as a whole: metadata, offsets, commits)

Each message carries the error's code and text, and `action` (what was being done) if given.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError

__all__ = [
    "UNREACHABLE_CODES",
    "Endpoint",
    "ferry_error",
    "kafka_error_of",
    "kafka_errors",
    "unavailable",
]

# Errors that mean "nobody answered": worth retrying with backoff rather than halting.
UNREACHABLE_CODES = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_COORDINATOR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
    }
)


class Endpoint(NamedTuple):
    """A cluster as an error names it, where no `ClusterConfig` is at hand (a copy task)."""

    alias: str
    bootstrap_servers: str


Cluster = ClusterConfig | Endpoint
Fix = str | Callable[[KafkaError], str]


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def unavailable(cluster: Cluster, exc: BaseException) -> KafkaUnavailableError:
    error = kafka_error_of(exc)
    detail = error.str() if error is not None else str(exc)
    return KafkaUnavailableError(cluster.alias, cluster.bootstrap_servers, detail)


@contextmanager
def kafka_errors(
    cluster: Cluster,
    action: str = "",
    *,
    topic: str | None = None,
    partition: int | None = None,
    fix: Fix | None = None,
    done: Collection[int] = (),
) -> Iterator[None]:
    """A `KafkaException` raised in the block, as the ferry error the module doc's table says.

    `action` is what the block does, read after "could not" ("create topic", "read the end of
    orders partition 3"). A `ReplicationError` (only with `fix`, a text or a function of the
    error) needs the `topic`.
    """
    try:
        yield
    except KafkaException as exc:
        error = kafka_error_of(exc)
        if error is not None and error.code() in done:
            return
        raise ferry_error(cluster, exc, action, topic=topic, partition=partition, fix=fix) from exc
    except TimeoutError as exc:
        # A future's result(timeout) raises this with no text; a busy controller (thousands of
        # topics created at once) is the usual cause, and the retry that follows succeeds.
        detail = str(exc) or "no answer in time"
        what = f"could not {action}: {detail}" if action else detail
        raise KafkaUnavailableError(cluster.alias, cluster.bootstrap_servers, what) from exc


def ferry_error(
    cluster: Cluster,
    exc: KafkaException,
    action: str = "",
    *,
    topic: str | None = None,
    partition: int | None = None,
    fix: Fix | None = None,
) -> FerryError:
    """The error `kafka_errors` raises for `exc`, for a caller that decides more first."""
    error = kafka_error_of(exc)
    text = f"{error.name()}: {error.str()}" if error is not None else str(exc)
    refused = error is not None and error.code() not in UNREACHABLE_CODES
    if refused and fix is not None and error is not None:
        if topic is None:
            raise ValueError("kafka_errors: a fix needs the topic the error is about")
        return ReplicationError(
            f"could not {action}: {text}." if action else f"{text}.",
            cluster=cluster.alias,
            topic=topic,
            partition=partition,
            fix=fix(error) if callable(fix) else fix,
        )
    detail = f"could not {action}: {text}" if action else text
    return KafkaUnavailableError(cluster.alias, cluster.bootstrap_servers, detail)
