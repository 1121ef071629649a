"""A Spark Structured Streaming checkpoint moved to another cluster: reading it, translating
its Kafka offsets through ferry's offset runs, writing it back with a backup.

No PySpark here: files go through `CheckpointStorage`, plain file I/O for a local directory
(`LocalStorage`); `ferry.engine.spark.checkpoint_files` gives Hadoop's FileSystem for any
other URI Spark reads. What each file becomes is decided in `ferry.offsets.spark_checkpoint`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from ferry.config.model import FerryConfig, FlowConfig
from ferry.flows.override import FlowControl
from ferry.locations import local_path
from ferry.offsets.application_offsets import Runs, StoredOffset, Translated, translate_stored
from ferry.offsets.index import Match, OffsetIndex, Translation
from ferry.offsets.routes import routes
from ferry.offsets.runs_and_checkpoints import FlowRunsStores
from ferry.offsets.spark_checkpoint import (
    Answer,
    CheckpointContents,
    CheckpointRefused,
    CheckpointRewrite,
    Position,
    plan_rewrite,
    positions,
    sink_batches,
)

__all__ = [
    "CheckpointStorage",
    "LocalStorage",
    "apply_rewrite",
    "fail_over_spark_checkpoint",
    "read_checkpoint",
]


class CheckpointStorage(Protocol):
    """A directory tree of small files; paths are relative, with `/`."""

    def where(self, path: str) -> str:
        """The full location of `path`, for messages."""
        ...

    def read(self, path: str) -> bytes | None:
        """The file's bytes, None when it does not exist."""
        ...

    def names(self, path: str) -> list[str]:
        """The names in a directory; empty when it does not exist."""
        ...

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file whole (parents created)."""
        ...

    def delete(self, path: str) -> None: ...

    def exists(self, path: str) -> bool: ...


class LocalStorage:
    """A local directory, by plain file I/O.

    Hadoop's local filesystem keeps a checksum beside each file Spark wrote (`.7.crc` for
    `7`) and checks it on read: a file rewritten here loses its stale checksum, or Spark
    would refuse the new contents."""

    def __init__(self, root: str | Path) -> None:
        self.root = local_path(root)

    def _path(self, path: str) -> Path:
        return self.root / path

    def where(self, path: str) -> str:
        return str(self._path(path))

    def read(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except FileNotFoundError:
            return None

    def names(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(self._path(path)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def write(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.ferry-tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        self._drop_checksum(target)

    def exists(self, path: str) -> bool:
        return self._path(path).exists()

    def delete(self, path: str) -> None:
        target = self._path(path)
        target.unlink(missing_ok=True)
        self._drop_checksum(target)

    @staticmethod
    def _drop_checksum(target: Path) -> None:
        target.with_name(f".{target.name}.crc").unlink(missing_ok=True)


def _batch_ids(names: Iterable[str]) -> list[int]:
    """Spark's metadata logs: a file per batch named by its id; anything else is not one."""
    return sorted(int(n) for n in names if n.isdigit())


def read_checkpoint(
    storage: CheckpointStorage, sink: CheckpointStorage | None = None
) -> CheckpointContents:
    """The files a restart depends on. `sink`: the sink's batch log (`_spark_metadata`)."""
    batches = _batch_ids(storage.names("offsets"))
    commits = _batch_ids(storage.names("commits"))
    offsets = {}
    for batch in batches[-2:]:
        data = storage.read(f"offsets/{batch}")
        if data is not None:
            offsets[batch] = data
    initial = {}
    for sid in storage.names("sources"):
        data = storage.read(f"sources/{sid}/0")
        if data is not None:
            initial[sid] = data
    root = storage.where("")
    if not batches and not commits and not initial:
        what = "it holds no batch" if storage.exists("") else "it does not exist"
        raise CheckpointRefused(
            f"{root}: not a Structured Streaming checkpoint with a Kafka source ({what}: no "
            "offsets/, commits/ or sources/)"
        )
    found = None
    if sink is not None:
        if not sink.exists(""):
            raise CheckpointRefused(
                f"{sink.where('')}: no such directory (the sink's batch log, such as "
                "<output>/_spark_metadata); nothing was changed"
            )
        found = sink_batches(sink.names(""))
    return CheckpointContents(root, offsets, batches, commits, initial, found)


class _ClampedIndex(OffsetIndex):
    """A partition's runs where a position past the replicated end maps to the end."""

    __slots__ = ("_inner",)

    def __init__(self, inner: OffsetIndex) -> None:
        super().__init__()
        self._inner = inner

    def __len__(self) -> int:
        return len(self._inner)

    def downstream(self, upstream_position: int) -> Translation:
        return _clamp(self._inner.downstream(upstream_position))

    def upstream(self, downstream_position: int) -> Translation:
        return _clamp(self._inner.upstream(downstream_position))


def _clamp(t: Translation) -> Translation:
    return Translation(t.offset, t.match) if t.match is Match.END and t.beyond else t


class _ClampedRuns:
    def __init__(self, runs: Runs) -> None:
        self._runs = runs

    def has(self, topic: str, partition: int) -> bool:
        return self._runs.has(topic, partition)

    def index(self, topic: str, partition: int) -> OffsetIndex:
        return _ClampedIndex(self._runs.index(topic, partition))


def _translate(
    config: FerryConfig,
    from_alias: str,
    to_alias: str,
    wanted: Sequence[Position],
    control: FlowControl | None,
    timeout: float,
) -> tuple[dict[Position, Answer | str], dict[Position, Answer | str]]:
    """Each position's exact answer, and for those refused, the answer clamped to the end
    of the copies (or why not)."""
    exact: dict[Position, Answer | str] = {}
    clamped: dict[Position, Answer | str] = {}
    with FlowRunsStores(config, timeout=timeout) as stores:
        given = [StoredOffset(*p) for p in wanted]
        answers = translate_stored(
            config, from_alias, to_alias, given, control=control, timeout=timeout, runs=stores
        )
        refused = []
        for position, answer in zip(wanted, answers, strict=True):
            if isinstance(answer, Translated):
                exact[position] = Answer(
                    answer.remote_topic, answer.remote_offset, answer.match, answer.via
                )
            else:
                exact[position] = answer.error
                refused.append(position)
        if not refused:
            return exact, clamped

        def clamping(flow: FlowConfig) -> Runs:
            return _ClampedRuns(stores(flow))

        again = translate_stored(
            config,
            from_alias,
            to_alias,
            [StoredOffset(*p) for p in refused],
            control=control,
            timeout=timeout,
            runs=clamping,
        )
        for position, answer in zip(refused, again, strict=True):
            if isinstance(answer, Translated):
                clamped[position] = Answer(
                    answer.remote_topic,
                    answer.remote_offset,
                    "clamped",
                    answer.via,
                    _replicated_from(str(exact[position])),
                )
            elif answer.error.startswith("nothing of "):
                clamped[position] = _empty(config, from_alias, to_alias, position, control)
            else:
                clamped[position] = answer.error
    return exact, clamped


def _replicated_from(error: str) -> int | None:
    marker = "(replicated position "
    if marker not in error:
        return None
    number = error.split(marker, 1)[1].split(")", 1)[0]
    return int(number) if number.isdigit() else None


def _empty(
    config: FerryConfig,
    from_alias: str,
    to_alias: str,
    position: Position,
    control: FlowControl | None,
) -> Answer | str:
    """A partition of which nothing was replicated: its copy is empty, so the query starts
    at its beginning (exact for offset 0; later offsets were read but never copied)."""
    topic, _partition, offset = position
    direct = f"{from_alias}->{to_alias}"
    found = routes(
        config, from_alias, topic, to_alias, lambda f: control if f.name == direct else None
    )
    if not found:
        return f"topic {topic} is not replicated from {from_alias} to {to_alias}"
    remote = found[0][-1].next_topic
    via = ", ".join(hop.flow.name for hop in found[0])
    return Answer(remote, 0, "empty" if offset == 0 else "clamped", via, 0)


def apply_rewrite(storage: CheckpointStorage, rewrite: CheckpointRewrite) -> None:
    """Every original into the backup directory first, then the new files (a failure half
    way leaves the originals whole in the backup)."""
    for change in rewrite.changes:
        storage.write(f"{rewrite.backup}/{change.path}", change.before)
    for change in rewrite.changes:
        if change.after is None:
            storage.delete(change.path)
        else:
            storage.write(change.path, change.after)


def fail_over_spark_checkpoint(
    config: FerryConfig,
    storage: CheckpointStorage,
    from_alias: str,
    to_alias: str,
    *,
    sink: CheckpointStorage | None = None,
    dry_run: bool = False,
    control: FlowControl | None = None,
    timeout: float = 10.0,
    now: datetime | None = None,
) -> CheckpointRewrite:
    """Move the checkpoint in `storage` from `from_alias` to `to_alias` (or, `dry_run`, say
    what would change). Reads the offset runs on the flows' targets, never `from_alias`.
    Raises `CheckpointRefused` (nothing changed) when the query cannot resume exactly."""
    contents = read_checkpoint(storage, sink)
    wanted = positions(contents)
    exact, clamped = _translate(config, from_alias, to_alias, wanted, control, timeout)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    rewrite = plan_rewrite(contents, from_alias, to_alias, exact, clamped, stamp=stamp)
    if not dry_run:
        apply_rewrite(storage, rewrite)
    return rewrite
