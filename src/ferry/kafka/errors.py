"""Turning librdkafka errors into ferry errors that say where and what to do.

`with kafka_errors(cluster, action, ...):` is the one place a `KafkaException` becomes a ferry
error, chained to the original (whose `KafkaError` keeps `.code()` and `.str()`):

    a code in `done`                      the work is done already: the block ends, quietly
    REFUSAL_CODES, with a `fix`           ReplicationError at cluster/topic/partition
    REFUSAL_CODES, without a `fix`        RefusedError: the cluster said no (an ACL, the
                                          credentials, a policy); its fix by the code, never
                                          retried as if the cluster were down
    UNREACHABLE_CODES, or no KafkaError   KafkaUnavailableError (retried with backoff)
    TimeoutError (a future's `result(t)`  KafkaUnavailableError: no answer in time is a
      with no answer within t)              cluster that does not answer, never a crash
    any other code, with a `fix`          ReplicationError at cluster/topic/partition
    any other code, without a `fix`       KafkaUnavailableError (a request about the cluster
                                          as a whole: metadata, offsets, commits; a leader
                                          or coordinator moving, a partition not ready yet)

Each message carries the error's code and text, and `action` (what was being done) if given.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError, KafkaUnavailableError, RefusedError, ReplicationError

__all__ = [
    "REFUSAL_CODES",
    "UNREACHABLE_CODES",
    "Endpoint",
    "ferry_error",
    "kafka_error_of",
    "kafka_errors",
    "refusal_fix",
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
        KafkaError._WAIT_COORD,  # no group coordinator found or reached in time
    }
)


_AUTHORIZATION = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
    }
)
_AUTHENTICATION = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.ILLEGAL_SASL_STATE,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
    }
)
# Answers that say no: the same request gets the same answer until someone changes an ACL,
# a credential, a policy or the request. Everything else without a fix is taken for a
# cluster that is down or busy (a leader, a coordinator moving) and retried.
REFUSAL_CODES = (
    _AUTHORIZATION
    | _AUTHENTICATION
    | frozenset(
        {
            KafkaError.POLICY_VIOLATION,
            KafkaError.INVALID_REQUEST,
            KafkaError.INVALID_CONFIG,
            KafkaError.INVALID_REPLICATION_FACTOR,
            KafkaError.UNSUPPORTED_VERSION,
            KafkaError.SECURITY_DISABLED,
        }
    )
)


def refusal_fix(cluster: Cluster, code: int, action: str = "") -> str:
    """What to do about a refusal of `cluster`, by its code."""
    if code in _AUTHORIZATION:
        what = f" to {action}" if action else ""
        return (
            f"grant ferry's principal on {cluster.alias} the ACL it needs{what}; "
            "`ferry doctor -c CONFIG` names each ACL ferry lacks with the kafka-acls.sh "
            "command that grants it"
        )
    if code in _AUTHENTICATION:
        return (
            f"check {cluster.alias}'s security settings (security.protocol, sasl.mechanism, "
            "sasl.username and sasl.password or sasl.jaas.config, ssl.*): its brokers did "
            "not accept ferry's credentials"
        )
    if code == KafkaError.POLICY_VIOLATION:
        return f"a policy of {cluster.alias} refused it; its broker's log says which rule"
    return f"the brokers of {cluster.alias} refused the request as it is (the reason above)"


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
    if error is not None and error.code() in REFUSAL_CODES:
        where = f"topic {topic}, " if topic is not None else ""
        fix_text = refusal_fix(cluster, error.code(), action)
        return RefusedError(cluster.alias, cluster.bootstrap_servers, where + detail, fix_text)
    return KafkaUnavailableError(cluster.alias, cluster.bootstrap_servers, detail)
