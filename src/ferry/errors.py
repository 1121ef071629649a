"""Every error ferry raises on purpose, in one place.

    FerryError
    ├── ConfigError              a config file or option is wrong; never retried
    │   └── UnsafeConfigError    a setting that would break the no-loss guarantee
    ├── LocalClusterError        `ferry local` could not start, find or stop a broker
    ├── KafkaUnavailableError    a cluster did not answer in time; retry with backoff
    └── ReplicationError         copying failed at a known cluster/topic/partition/offset

The CLI prints `str(error)` and exits non-zero, so each message must say what was wrong,
where (file and key, or cluster, topic, partition and offset) and what would fix it.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FerryError",
    "KafkaUnavailableError",
    "LocalClusterError",
    "ReplicationError",
    "UnsafeConfigError",
]


class FerryError(Exception):
    """Base of every error ferry raises deliberately."""


class ConfigError(FerryError):
    """A configuration problem, located by file, line and key where they are known."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        line: int | None = None,
    ) -> None:
        self.file = file
        self.key = key
        self.line = line
        self.reason = message
        where = []
        if file is not None:
            where.append(f"{file}:{line}" if line is not None else file)
        if key is not None:
            where.append(f"key '{key}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class UnsafeConfigError(ConfigError):
    """A setting that would let ferry lose or duplicate data silently; refused, not warned."""


class LocalClusterError(FerryError):
    """A local broker failed to start, answer or stop."""


class KafkaUnavailableError(FerryError):
    """A cluster could not be reached; the operation may succeed if retried later."""

    def __init__(self, cluster: str, bootstrap: str, detail: str) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        super().__init__(f"cluster {cluster} ({bootstrap}) is unreachable: {detail}")


class ReplicationError(FerryError):
    """Copying stopped at a precise record; carries where, so an operator can fix and rerun."""

    def __init__(
        self,
        message: str,
        *,
        cluster: str,
        topic: str,
        partition: int,
        offset: int | None = None,
        fix: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.fix = fix
        at = f"cluster {cluster}, topic {topic}, partition {partition}"
        if offset is not None:
            at += f", offset {offset}"
        text = f"{at}: {message}"
        if fix:
            text += f" Fix: {fix}"
        super().__init__(text)
