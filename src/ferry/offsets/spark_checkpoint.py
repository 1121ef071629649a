"""A Spark Structured Streaming checkpoint whose source is Kafka, moved to another cluster.

Pure code, no I/O: parsing and writing the checkpoint's offset logs, and deciding what each
file becomes. `ferry.offsets.spark_checkpoint_io` reads the files and translates the offsets.

What Spark keeps (spark-sql-kafka-0-10's source, Spark's MicroBatchExecution):
- `offsets/<N>`: batch N as planned: a version line (`v1`; `v2` names each source, `id:json`),
  a metadata line (watermark, batch time, a few SQL settings: no topic), then one line per
  source; Kafka's is `{"topic":{"0":123,...}}`, each the next offset to read.
- `commits/<N>`: batch N ran and its sink committed.
- `sources/<id>/0`: the Kafka source's initial offsets (a zero byte, `v1`, the same JSON),
  read only to start batch 0.

On restart Spark takes the latest `offsets/L`. If `commits/L` exists it plans batch L+1 from
L's offsets; if only `commits/L-1` does, it runs batch L again over exactly [L-1, L), and
an exactly-once file sink that already holds batch L (`<output>/_spark_metadata/L`) skips it.

So moving the query to another cluster rewrites the committed batch's offsets (where the next
batch starts) and decides the planned, uncommitted one, with the exact rule in each case:
- every end offset of the planned batch maps: translated (re-run over the copies of the same
  records, or skipped by a sink that holds it: either way exact);
- some do not (A's records past what reached B): if the sink holds no entry for it, it is
  removed so Spark plans it again from the committed offsets over what B has; if the sink
  holds it, its ends are clamped to the end of the copies (the sink skips the re-run; the
  next batch starts after the last copy);
- unknown whether the sink holds it: refused, naming the option that says.
An offset past what was replicated (the query read records of A that never reached B) is
clamped the same way and said: those records are in the output already, and would be read
again if they ever reached B (A back, its flow copying again).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ferry.errors import FerryError

__all__ = [
    "KNOWN_VERSIONS",
    "Answer",
    "Change",
    "CheckpointContents",
    "CheckpointRefused",
    "CheckpointRewrite",
    "Moved",
    "OffsetFile",
    "Position",
    "SourceLine",
    "kafka_offsets",
    "parse_initial_offsets",
    "parse_offset_file",
    "plan_rewrite",
    "positions",
    "render_initial_offsets",
    "render_kafka_offsets",
    "sink_batches",
]

KNOWN_VERSIONS = (1, 2)  # OffsetSeqLog's v1 (a line per source) and v2 (`id:json` per source)
VOID = "-"  # a source with no offset in this batch

KafkaOffsets = dict[str, dict[int, int]]
Position = tuple[str, int, int]  # topic, partition, offset on the cluster left


class CheckpointRefused(FerryError):
    """The checkpoint cannot be moved as it is: the message names the file and why."""


@dataclass(frozen=True)
class SourceLine:
    """One source's offset in an offsets file: its JSON as written, or `-`."""

    key: str | None  # v2: the source's id as written; v1: None (the line's place is the id)
    text: str


@dataclass(frozen=True)
class OffsetFile:
    """One `offsets/<N>` file."""

    name: str  # "offsets/7", for messages
    batch: int
    version: int
    metadata: str  # kept verbatim
    sources: tuple[SourceLine, ...]

    def source_id(self, index: int) -> str:
        key = self.sources[index].key
        return key if key is not None else str(index)

    def with_sources(self, lines: Sequence[SourceLine]) -> OffsetFile:
        return OffsetFile(self.name, self.batch, self.version, self.metadata, tuple(lines))

    def render(self) -> bytes:
        lines = [f"v{self.version}", self.metadata]
        lines += [s.text if s.key is None else f"{s.key}:{s.text}" for s in self.sources]
        return "\n".join(lines).encode()


def parse_offset_file(name: str, batch: int, data: bytes) -> OffsetFile:
    """`offsets/<N>` as Spark's OffsetSeqLog writes it; a version ferry does not know, refused."""
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise CheckpointRefused(f"{name}: not a Spark offsets file (not UTF-8: {exc})") from exc
    lines = text.split("\n")
    match = re.fullmatch(r"v(\d+)", lines[0].strip())
    if match is None:
        raise CheckpointRefused(
            f"{name}: not a Spark offsets file (its first line is {lines[0][:40]!r}, "
            "not a version such as v1)"
        )
    version = int(match[1])
    if version not in KNOWN_VERSIONS:
        raise CheckpointRefused(
            f"{name}: offsets log format v{version}, which ferry does not know (it knows "
            f"{', '.join(f'v{v}' for v in KNOWN_VERSIONS)}); nothing was changed"
        )
    if len(lines) < 2:
        raise CheckpointRefused(f"{name}: no metadata line after the version; nothing was changed")
    sources = []
    for line in lines[2:]:
        if version == 1:
            sources.append(SourceLine(None, line))
            continue
        key, colon, offset = line.partition(":")
        if not colon:
            raise CheckpointRefused(f"{name}: source line {line[:60]!r} is not id:offset")
        sources.append(SourceLine(key, offset))
    return OffsetFile(name, batch, version, lines[1], tuple(sources))


def kafka_offsets(text: str) -> KafkaOffsets | None:
    """The Kafka source's offsets, `{"topic":{"0":123}}`; None for any other source's JSON."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    out: KafkaOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            return None
        out[topic] = {}
        for partition, offset in partitions.items():
            if not re.fullmatch(r"\d+", partition):
                return None
            if not isinstance(offset, int) or isinstance(offset, bool):
                return None
            out[topic][int(partition)] = offset
    return out


def render_kafka_offsets(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """As the connector writes them: compact, partitions in order."""
    ordered = {t: {str(p): offsets[t][p] for p in sorted(offsets[t])} for t in sorted(offsets)}
    return json.dumps(ordered, separators=(",", ":"))


def parse_initial_offsets(name: str, data: bytes) -> KafkaOffsets:
    """`sources/<id>/0` as the Kafka source writes it: a zero byte, `v1`, the offsets JSON."""
    body = data[1:] if data[:1] == b"\x00" else data
    text = body.decode(errors="replace")
    version, newline, rest = text.partition("\n")
    if not newline or not re.fullmatch(r"v\d+", version):
        raise CheckpointRefused(
            f"{name}: not the Kafka source's initial offsets (no version line); "
            "is the query's source Kafka (spark-sql-kafka-0-10)?"
        )
    if version != "v1":
        raise CheckpointRefused(
            f"{name}: initial offsets format {version}, which ferry does not know (it knows "
            "v1); nothing was changed"
        )
    offsets = kafka_offsets(rest)
    if offsets is None:
        raise CheckpointRefused(
            f"{name}: not the Kafka source's initial offsets ({rest[:60]!r}); is the query's "
            "source Kafka (spark-sql-kafka-0-10)?"
        )
    return offsets


def render_initial_offsets(offsets: Mapping[str, Mapping[int, int]]) -> bytes:
    return b"\x00" + f"v1\n{render_kafka_offsets(offsets)}".encode()


def sink_batches(names: Sequence[str]) -> frozenset[int]:
    """The batch ids a file sink's log (`<output>/_spark_metadata`) holds: `N` and `N.compact`."""
    found = set()
    for name in names:
        match = re.fullmatch(r"(\d+)(\.compact)?", name)
        if match:
            found.add(int(match[1]))
    return frozenset(found)


@dataclass(frozen=True)
class CheckpointContents:
    """What was read of a checkpoint: the files a restart depends on, as bytes."""

    root: str
    offsets: Mapping[int, bytes]  # the latest batch's file and the one before it
    batches: Sequence[int]  # every batch id in offsets/
    commits: Sequence[int]  # every batch id in commits/
    initial: Mapping[str, bytes]  # source id -> sources/<id>/0
    sink: frozenset[int] | None = None  # the sink log's batch ids; None: not given


@dataclass(frozen=True)
class Answer:
    """Where one position lands on the other cluster."""

    remote_topic: str
    remote_offset: int
    how: str  # "exact", "gap", "end" (ferry.offsets.index.Match), "empty" or "clamped"
    via: str = ""
    replicated: int | None = None  # clamped: the replicated position on the cluster left


@dataclass(frozen=True)
class Moved:
    """One partition's offset in one file, before and after."""

    file: str
    topic: str
    partition: int
    offset: int
    remote_topic: str
    remote_offset: int
    how: str

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "remote_topic": self.remote_topic,
            "remote_offset": self.remote_offset,
            "how": self.how,
        }


@dataclass(frozen=True)
class Change:
    """A file rewritten (`after`), or removed (`after` None); its original goes to the backup."""

    path: str  # relative to the checkpoint
    before: bytes
    after: bytes | None


PlannedAction = Literal["none", "translated", "removed", "clamped"]


@dataclass(frozen=True)
class CheckpointRewrite:
    """What moving the checkpoint changes, and what the restarted query must subscribe to."""

    checkpoint: str
    from_alias: str
    to_alias: str
    committed: int | None
    planned: int | None
    planned_action: PlannedAction
    changes: tuple[Change, ...]
    moved: tuple[Moved, ...]
    topics: tuple[str, ...]  # the remote topics on to_alias
    backup: str  # the backup directory, relative to the checkpoint
    notes: tuple[str, ...] = field(default=())

    @property
    def subscribe(self) -> str:
        return ",".join(self.topics)

    @property
    def subscribe_pattern(self) -> str:
        return "|".join(re.escape(t) for t in self.topics)

    def as_json(self) -> dict[str, Any]:
        return {
            "checkpoint": self.checkpoint,
            "from": self.from_alias,
            "to": self.to_alias,
            "committed_batch": self.committed,
            "planned_batch": self.planned,
            "planned_batch_action": self.planned_action,
            "subscribe": self.subscribe,
            "subscribePattern": self.subscribe_pattern,
            "files": [
                {"path": c.path, "action": "rewritten" if c.after is not None else "removed"}
                for c in self.changes
            ],
            "offsets": [m.as_json() for m in self.moved],
            "backup": self.backup,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class _Layout:
    committed: OffsetFile | None
    planned: OffsetFile | None
    kafka: tuple[str, ...]  # the Kafka sources' ids
    initial: Mapping[str, KafkaOffsets]


def _batch_state(files: CheckpointContents) -> tuple[int | None, int | None]:
    """(committed batch, planned batch) as Spark's restart sees them."""
    latest = max(files.batches, default=None)
    done = max(files.commits, default=None)
    if latest is None:
        if done is not None:
            raise CheckpointRefused(
                f"{files.root}: commits/{done} but no offsets/ at all: not a checkpoint ferry "
                "can move"
            )
        return None, None
    if done == latest:
        return latest, None
    if done is None and latest == 0:
        return None, 0
    if done is not None and done == latest - 1:
        return done, latest
    committed = "no batch" if done is None else f"batch {done}"
    raise CheckpointRefused(
        f"offsets/{latest}: the latest planned batch, while commits/ has {committed}: Spark "
        "would run one planned batch again, not several; ferry moves a checkpoint at most one "
        "batch ahead of its commits"
    )


def _layout(files: CheckpointContents) -> _Layout:
    committed_id, planned_id = _batch_state(files)
    parsed = {
        b: parse_offset_file(f"offsets/{b}", b, files.offsets[b])
        for b in (committed_id, planned_id)
        if b is not None
    }
    committed = parsed.get(committed_id) if committed_id is not None else None
    planned = parsed.get(planned_id) if planned_id is not None else None
    initial = {
        sid: parse_initial_offsets(f"sources/{sid}/0", data) for sid, data in files.initial.items()
    }
    latest = planned or committed
    if latest is None:
        if not initial:
            raise CheckpointRefused(
                f"{files.root}: no offsets/ and no sources/*/0: not a Structured Streaming "
                "checkpoint with a Kafka source (spark-sql-kafka-0-10)"
            )
        return _Layout(None, None, tuple(sorted(initial)), initial)
    kafka = []
    for i, line in enumerate(latest.sources):
        sid = latest.source_id(i)
        if sid in initial and line.text != VOID and kafka_offsets(line.text) is None:
            raise CheckpointRefused(
                f"{latest.name}: source {sid}'s offsets are not Kafka's ({line.text[:60]!r}) "
                f"while sources/{sid}/0 is the Kafka source's; nothing was changed"
            )
        if sid in initial:
            kafka.append(sid)
    if not kafka:
        raise CheckpointRefused(
            f"{latest.name}: no source of this query is Kafka (spark-sql-kafka-0-10 writes "
            "its initial offsets to sources/<id>/0, and there is none): ferry moves only "
            "Kafka sources' offsets; nothing was changed"
        )
    return _Layout(committed, planned, tuple(kafka), initial)


def _kafka_lines(offsets: OffsetFile | None, kafka: Sequence[str]) -> dict[str, KafkaOffsets]:
    if offsets is None:
        return {}
    out = {}
    for i, line in enumerate(offsets.sources):
        sid = offsets.source_id(i)
        parsed = kafka_offsets(line.text) if sid in kafka else None
        if parsed is not None:
            out[sid] = parsed
    return out


def _each(offsets: Mapping[str, Mapping[int, int]]) -> list[Position]:
    return [(t, p, o) for t in sorted(offsets) for p, o in sorted(offsets[t].items())]


def positions(files: CheckpointContents) -> list[Position]:
    """Every Kafka position the rewrite needs translated, once each."""
    layout = _layout(files)
    seen: dict[Position, None] = {}
    for source in (layout.committed, layout.planned):
        for offsets in _kafka_lines(source, layout.kafka).values():
            seen.update(dict.fromkeys(_each(offsets)))
    for offsets in layout.initial.values():
        seen.update(dict.fromkeys(_each(offsets)))
    return list(seen)


Answers = Mapping[Position, "Answer | str"]


def _translated(
    offsets: KafkaOffsets, answers: Mapping[Position, Answer], name: str
) -> tuple[KafkaOffsets, list[Moved]]:
    out: KafkaOffsets = {}
    moved = []
    for t, p, o in _each(offsets):
        a = answers[(t, p, o)]
        out.setdefault(a.remote_topic, {})[p] = a.remote_offset
        moved.append(Moved(name, t, p, o, a.remote_topic, a.remote_offset, a.how))
    return out, moved


def _pick(
    offsets: KafkaOffsets, exact: Answers, clamped: Answers
) -> tuple[dict[Position, Answer], list[str], list[Position]]:
    """Each position's answer: exact where it maps, else clamped; the refusals; the clamped."""
    chosen: dict[Position, Answer] = {}
    refused: list[str] = []
    clamps: list[Position] = []
    for position in _each(offsets):
        answer = exact.get(position)
        if isinstance(answer, Answer):
            chosen[position] = answer
            continue
        fallback = clamped.get(position)
        if isinstance(fallback, Answer):
            chosen[position] = fallback
            if fallback.how == "clamped":
                clamps.append(position)
            continue
        refused.append(fallback or answer or f"{position}: no answer")
    return chosen, refused, clamps


def _clamp_note(where: str, clamps: Sequence[Position], answers: Mapping[Position, Answer]) -> str:
    parts = []
    for t, p, o in clamps:
        a = answers[(t, p, o)]
        end = a.replicated if a.replicated is not None else "?"
        parts.append(
            f"{t} partition {p}: offsets {end} to {o - 1} (up to {o}, exclusive) were read "
            f"but never replicated; resumes at {a.remote_topic} offset {a.remote_offset}"
        )
    return (
        f"{where}: the query read records that never reached the target ("
        + "; ".join(parts)
        + "); they are in its output once, and would be read again if they were ever "
        "copied there (the source back and its flow copying again)"
    )


def _rewrite_file(
    offsets: OffsetFile, kafka: Sequence[str], answers: Mapping[Position, Answer]
) -> tuple[OffsetFile, list[Moved], set[str]]:
    lines = list(offsets.sources)
    moved: list[Moved] = []
    topics: set[str] = set()
    for sid, parsed in _kafka_lines(offsets, kafka).items():
        index = next(i for i in range(len(lines)) if offsets.source_id(i) == sid)
        new, m = _translated(parsed, answers, offsets.name)
        moved += m
        topics |= set(new)
        lines[index] = SourceLine(lines[index].key, render_kafka_offsets(new))
    return offsets.with_sources(lines), moved, topics


def plan_rewrite(
    files: CheckpointContents,
    from_alias: str,
    to_alias: str,
    exact: Answers,
    clamped: Answers,
    *,
    stamp: str,
) -> CheckpointRewrite:
    """What each file becomes. `exact`: each position's exact translation or the reason it
    has none; `clamped`: for those, the translation clamped to the replicated end (an
    `Answer` with how "clamped" or "empty"), or why not. `stamp` names the backup directory.
    Raises `CheckpointRefused` when the query cannot resume exactly."""
    layout = _layout(files)
    changes: list[Change] = []
    moved: list[Moved] = []
    topics: set[str] = set()
    notes: list[str] = []
    refusals: list[str] = []
    answers: dict[Position, Answer] = {}

    committed_kafka = _kafka_lines(layout.committed, layout.kafka)
    for offsets in committed_kafka.values():
        chosen, refused, clamps = _pick(offsets, exact, clamped)
        answers.update(chosen)
        refusals += refused
        if clamps and layout.committed is not None:
            notes.append(_clamp_note(layout.committed.name, clamps, answers))

    action: PlannedAction = "none"
    planned = layout.planned
    if planned is not None:
        planned_kafka = _kafka_lines(planned, layout.kafka)
        every = [pos for offsets in planned_kafka.values() for pos in _each(offsets)]
        if all(isinstance(exact.get(pos), Answer) for pos in every):
            action = "translated"
            # ignore: each is an Answer (checked just above); mypy cannot narrow through all().
            answers.update({pos: exact[pos] for pos in every})  # type: ignore[misc]
        elif files.sink is None:
            beyond = [pos for pos in every if not isinstance(exact.get(pos), Answer)]
            refusals.append(
                f"{planned.name}: batch {planned.batch} was planned but not committed, and "
                f"{len(beyond)} of its end offsets have no copy on {to_alias} ("
                + "; ".join(str(exact.get(pos)) for pos in beyond[:3])
                + "): whether its sink already wrote the batch decides what is exact; give "
                "the sink's batch log (--sink-log <output>/_spark_metadata for a file sink) "
                "or run ferry until it has caught up"
            )
        elif planned.batch in files.sink:
            action = "clamped"
            for offsets in planned_kafka.values():
                chosen, refused, clamps = _pick(offsets, exact, clamped)
                answers.update(chosen)
                refusals += refused
                if clamps:
                    notes.append(_clamp_note(planned.name, clamps, answers))
            notes.append(
                f"{planned.name}: the sink already holds batch {planned.batch}, so Spark "
                "skips its re-run; its end offsets were clamped to the end of the copies"
            )
        else:
            action = "removed"
            notes.append(
                f"{planned.name}: batch {planned.batch} was planned but its sink holds no entry "
                f"for it: removed, so Spark plans it again from the committed offsets over "
                f"what {to_alias} has"
            )

    if refusals:
        raise CheckpointRefused(
            "the checkpoint cannot be moved exactly; nothing was changed: " + "; ".join(refusals)
        )

    for source, keep in ((layout.committed, True), (planned, action != "removed")):
        if source is None:
            continue
        if not keep:
            changes.append(Change(f"offsets/{source.batch}", files.offsets[source.batch], None))
            continue
        rewritten, m, t = _rewrite_file(source, layout.kafka, answers)
        moved += m
        topics |= t
        after = rewritten.render()
        changes.append(Change(f"offsets/{source.batch}", files.offsets[source.batch], after))

    start = _start_offsets(layout, answers)
    for sid in layout.kafka:
        initial = layout.initial[sid]
        name = f"sources/{sid}/0"
        chosen, refused, clamps = _pick(initial, exact, clamped)
        if layout.committed is None:
            if refused:
                raise CheckpointRefused(
                    f"{name}: the offsets batch 0 starts from cannot be moved exactly; nothing "
                    "was changed: " + "; ".join(refused)
                )
            if clamps:
                notes.append(_clamp_note(name, clamps, chosen))
        elif refused or clamps:
            if sid not in start:
                notes.append(f"{name}: left as it is (Spark reads it only to start batch 0)")
                continue
            notes.append(
                f"{name}: its offsets have no exact copy on {to_alias}; Spark reads it only to "
                "start batch 0, so it now holds where the restarted query starts"
            )
            topics |= set(start[sid])
            changes.append(Change(name, files.initial[sid], render_initial_offsets(start[sid])))
            continue
        new, m = _translated(initial, chosen, name)
        moved += m
        topics |= set(new)
        changes.append(Change(name, files.initial[sid], render_initial_offsets(new)))

    backup = f"ferry-backup/{from_alias}-to-{to_alias}-{stamp}"
    return CheckpointRewrite(
        files.root,
        from_alias,
        to_alias,
        layout.committed.batch if layout.committed else None,
        planned.batch if planned else None,
        action,
        tuple(changes),
        tuple(moved),
        tuple(sorted(topics)),
        backup,
        tuple(notes),
    )


def _start_offsets(layout: _Layout, answers: Mapping[Position, Answer]) -> dict[str, KafkaOffsets]:
    """Each Kafka source's offsets where the restarted query starts (the committed batch's)."""
    out: dict[str, KafkaOffsets] = {}
    for sid, offsets in _kafka_lines(layout.committed, layout.kafka).items():
        out[sid], _moved = _translated(offsets, answers, "")
    return out
