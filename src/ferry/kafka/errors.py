"""Turning librdkafka errors into ferry errors that say where and what to do."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import KafkaUnavailableError

__all__ = ["UNREACHABLE_CODES", "kafka_error_of", "unavailable"]

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


def kafka_error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def unavailable(cluster: ClusterConfig, exc: BaseException) -> KafkaUnavailableError:
    error = kafka_error_of(exc)
    detail = error.str() if error is not None else str(exc)
    return KafkaUnavailableError(cluster.alias, cluster.bootstrap_servers, detail)
