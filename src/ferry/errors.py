"""Every error ferry raises on purpose, in one place.

    FerryError
    ├── ConfigError              a config file or option is wrong; never retried
    │   └── UnsafeConfigError    a setting that would break the no-loss guarantee
    ├── LocalClusterError        `ferry local` could not start, find or stop a broker
    ├── KafkaUnavailableError    a cluster did not answer in time (or a batch must be copied
    │                            again); retry with backoff
    ├── RefusedError             a cluster answered no (an ACL, credentials, a policy, a request
    │                            it rejects); never retried as an outage: it says the fix
    ├── ReplicationError         copying failed at a known cluster/topic/partition/offset
    └── ControlError             a change asked of a running ferry (the API) was refused
        ├── UnknownFlowError     no running flow by that name (HTTP 404)
        └── RejectedChangeError  the change makes no sense: say why (HTTP 400)

The CLI prints `str(error)` and exits non-zero, so each message must say what was wrong,
where (file and key, or cluster, topic, partition and offset) and what would fix it.
"""

from __future__ import annotations

import base64
import json
import re

__all__ = [
    "ConfigError",
    "ControlError",
    "FerryError",
    "KafkaUnavailableError",
    "LocalClusterError",
    "RefusedError",
    "RejectedChangeError",
    "ReplicationError",
    "UnknownFlowError",
    "UnsafeConfigError",
    "error_from_text",
    "error_to_text",
    "readable",
]


class FerryError(Exception):
    """Base of every error ferry raises deliberately."""


class ControlError(FerryError):
    """A change asked of a running `ferry run` over its API, refused with the reason."""


class UnknownFlowError(ControlError):
    """The change names a flow that is not running."""


class RejectedChangeError(ControlError):
    """The change names a running flow but cannot be made (say, a topic the source lacks)."""


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

    def __init__(
        self, cluster: str, bootstrap: str, detail: str, what: str = "is unreachable"
    ) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self.detail = detail
        self.what = what  # what happened, when it was not that the cluster did not answer
        super().__init__(f"cluster {cluster} ({bootstrap}) {what}: {detail}")


class RefusedError(FerryError):
    """A cluster answered and said no: an authorization or authentication failure, a policy,
    a request it rejects. Not an outage: retrying changes nothing until someone acts."""

    def __init__(self, cluster: str, bootstrap: str, detail: str, fix: str) -> None:
        self.cluster = cluster
        self.bootstrap = bootstrap
        self.detail = detail
        self.fix = fix
        super().__init__(f"cluster {cluster} ({bootstrap}) refused: {detail}. Fix: {fix}")


class ReplicationError(FerryError):
    """Copying stopped at a precise record; carries where, so an operator can fix and rerun."""

    def __init__(
        self,
        message: str,
        *,
        cluster: str,
        topic: str,
        partition: int | None = None,
        offset: int | None = None,
        fix: str | None = None,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.fix = fix
        self.reason = message
        at = f"cluster {cluster}, topic {topic}"
        if partition is not None:
            at += f", partition {partition}"
        if offset is not None:
            at += f", offset {offset}"
        text = f"{at}: {message}"
        if fix:
            text += f" Fix: {fix}"
        super().__init__(text)


# Errors raised inside Spark (planner or sink) reach the driver as text in a Java exception.
# They travel as `[ferry-error:<base64 json>]` so the CLI can print the original message and
# know whether to retry, instead of showing a Java and Python stack trace.
_WIRE = re.compile(r"\[ferry-error:([A-Za-z0-9+/=]+)\]")


def error_to_text(error: FerryError) -> str:
    """`str(error)` followed by a marker `error_from_text` turns back into the error."""
    fields: dict[str, object] = {"kind": type(error).__name__, "text": str(error)}
    if isinstance(error, ReplicationError):
        fields.update(
            reason=error.reason,
            cluster=error.cluster,
            topic=error.topic,
            partition=error.partition,
            offset=error.offset,
            fix=error.fix,
        )
    elif isinstance(error, KafkaUnavailableError):
        fields.update(
            cluster=error.cluster, bootstrap=error.bootstrap, detail=error.detail, what=error.what
        )
    elif isinstance(error, RefusedError):
        fields.update(
            cluster=error.cluster, bootstrap=error.bootstrap, detail=error.detail, fix=error.fix
        )
    encoded = base64.b64encode(json.dumps(fields).encode()).decode()
    return f"{error} [ferry-error:{encoded}]"


def error_from_text(text: str) -> FerryError | None:
    """The first ferry error marked in `text` (e.g. a Spark exception message), or None."""
    match = _WIRE.search(text)
    if match is None:
        return None
    fields = json.loads(base64.b64decode(match.group(1)))
    kind = fields.pop("kind")
    if kind == "ReplicationError":
        return ReplicationError(
            fields["reason"],
            cluster=fields["cluster"],
            topic=fields["topic"],
            partition=fields["partition"],
            offset=fields["offset"],
            fix=fields["fix"],
        )
    if kind == "KafkaUnavailableError":
        return KafkaUnavailableError(
            fields["cluster"],
            fields["bootstrap"],
            fields["detail"],
            fields.get("what", "is unreachable"),
        )
    if kind == "RefusedError":
        return RefusedError(fields["cluster"], fields["bootstrap"], fields["detail"], fields["fix"])
    return FerryError(fields["text"])


def readable(text: str) -> str:
    """`text` for a person: without ferry's error markers (each follows its error's message,
    which stays)."""
    return _WIRE.sub("", text).rstrip()
