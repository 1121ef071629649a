"""Schemas follow the data: each copied record's schema registered on the target, its id
rewritten to the target's.

No PySpark here. The copy loop calls `SchemaTranslator.translate` for every record's key and
value before producing it. A payload in the Confluent wire format (kafka/schema_wire.py) names
a schema by its id in the source cluster's registry; the target's registry knows that schema
by another id, or knows another schema by that id. So, the first time an id is met for a
topic, the translator reads the schema (and, depth first, every schema it references) from the
source registry and registers it on the target under the subject the target's consumers use
(`target_subject`), and remembers the target's id: the registries are asked once per schema
and topic, never per record. A new version registered on the source while ferry runs is a new
id, met by the first record that uses it, and registered then, before that record is written.

Ids are always translated, never kept: a target registry with schemas of its own (the usual
case for a standby that also runs local producers) has given those ids to other schemas, and
a registry cannot be made to give a schema an id of the caller's choosing through the
Confluent-compatible API unless it is in IMPORT mode, which Apicurio's does not offer. Where
the target's id equals the source's the payload is unchanged; where it differs, the 4 id
bytes are rewritten (nothing else) and the source's id goes in a header
(`ferry.schema.id.value` / `.key`), the first hop's kept on later hops, like `ferry.origin`.

What never happens: a record written with an id the translator could not map. A registry
that does not answer raises `RegistryUnavailableError` (a `KafkaUnavailableError` naming the
registry, the cluster, topic, partition, offset and schema id). In a lease the copy loop
holds only that record's partition at that record and goes on with the bin's others (records
whose ids are mapped already need no registry); elsewhere the task fails and is retried from
the flow's committed position. While a registry is not answering the translator asks it
again only after a backoff (1 s, doubling, at most `RETRY_MAX_SECONDS`), so a hung registry
does not cost every slice a timeout; the first answer resumes every partition held on it.
Each partition's hold, and the registry's return, is said once (`CopyContext.notice`). A
schema the target refuses raises `ReplicationError`. A payload not in the wire format, or
whose id the source registry does not know (404: not a registry payload after all), is
copied unchanged and counted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError
from ferry.kafka.schema_wire import (
    MAGIC_BYTE,
    ORIGINAL_ID_HEADERS,
    WIRE_HEADER_SIZE,
    pick_subject,
    target_subject,
)

__all__ = [
    "RegistryEndpoint",
    "RegistryUnavailableError",
    "SchemaTranslator",
    "check_registry",
    "translator_for",
]

# The source registry answers 404 with these codes for an id it never gave (Confluent's
# 40403 "schema not found"; Apicurio's ccompat answers the same).
_NOT_FOUND = 404
_CONFLICT = 409  # incompatible, or (Apicurio) registered a moment ago by another task
_UNKNOWN = -1  # this id is no schema of the source registry's
_SAME: tuple[bytes, bytes] = (b"", b"")  # cached: copy the payload as it is
# A registry that did not answer is asked again after 1 s, then 2, 4, ... at most this long.
RETRY_MAX_SECONDS = 15.0
# A registration answered 409 is looked up this long while the registration that won completes.
CONFLICT_LOOKUP_SECONDS = 5.0
# After a registration, this many of the subject's newest versions are checked for duplicates.
DUPLICATE_WINDOW = 8


class RegistryUnavailableError(KafkaUnavailableError):
    """A schema registry did not answer while a record's schema id was being mapped: the
    record is not written; its partition holds (a lease) or the task fails and is retried."""

    def __init__(self, alias: str, url: str, reason: str) -> None:
        self.reason = reason  # what was being done, and what the registry's client said
        super().__init__(
            alias,
            url,
            f"{reason}; the partition holds until the registry answers (nothing is written "
            "with an unmapped schema id)",
            what="schema registry did not answer",
        )


@dataclass
class _Outage:
    """A registry that did not answer: when to ask it again, and what it last said."""

    retry_at: float
    failures: int
    detail: str


@dataclass
class RegistryEndpoint:
    """One cluster's registry: its alias, its URL (for messages) and a client of it."""

    alias: str
    url: str
    client: Any  # confluent_kafka.schema_registry.SchemaRegistryClient, or a test's fake


@dataclass
class TranslatorStats:
    """The registry calls of this Python worker's translator (per schema, not per record) and
    the ids the source registry did not know; per-record counts are in PartitionResult."""

    lookups: int = 0  # schemas read from the source registry (references included)
    registrations: int = 0  # schemas registered on the target (references included)
    unknown_ids: set[int] = field(default_factory=set)
    duplicates_left: int = 0  # racing registrations' duplicate versions that could not be deleted


class SchemaTranslator:
    """Maps source schema ids to target ids for records copied from one cluster to another,
    registering each schema on the target before the first record that uses it."""

    def __init__(self, source: RegistryEndpoint, target: RegistryEndpoint) -> None:
        self.source = source
        self.target = target
        self.stats = TranslatorStats()
        # (source topic, remote topic, is key, source id's 4 bytes) -> (magic byte and target
        # id, source id as a header value), or _SAME (an unknown id, or the same on both sides)
        self._ids: dict[tuple[str, str, bool, bytes], tuple[bytes, bytes]] = {}
        # (target subject, source subject, source version) -> target version, for references
        self._references: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()  # a commit thread may share the worker's translator
        self._outages: dict[str, _Outage] = {}  # registry alias -> its outage
        self._held: set[tuple[str, int]] = set()  # partitions held on a registry (said once)
        self._clock = time.monotonic
        self._sleep = time.sleep
        self._levels: set[str] = set()  # target subjects whose compatibility level was copied
        self._default_level: str | None = None  # the source registry's global level, once read

    def translate(
        self,
        r: CopyRange,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        result: PartitionResult,
        ctx: CopyContext,
    ) -> tuple[bytes | None, bytes | None]:
        """The copy's key and value, ids rewritten where the target's differ; the source's
        ids appended to `headers`. Raises rather than return a payload it could not map."""
        # Inlined first test (schema_wire.schema_id's): a plain payload costs no call.
        if key is not None:
            if len(key) < WIRE_HEADER_SIZE or key[0] != MAGIC_BYTE:
                result.schema_unchanged += 1
            else:
                key = self._payload(r, offset, True, key, headers, result, ctx)
        if value is not None:
            if len(value) < WIRE_HEADER_SIZE or value[0] != MAGIC_BYTE:
                result.schema_unchanged += 1
            else:
                value = self._payload(r, offset, False, value, headers, result, ctx)
        return key, value

    def _payload(
        self,
        r: CopyRange,
        offset: int,
        is_key: bool,
        payload: bytes,
        headers: list[tuple[str, bytes | None]],
        result: PartitionResult,
        ctx: CopyContext,
    ) -> bytes:
        # A registry payload's path: a dictionary lookup and one copy (schema_wire's rules,
        # inlined: this runs for every such record of a flow that syncs schemas).
        cache_key = (r.topic, r.remote_topic, is_key, payload[1:WIRE_HEADER_SIZE])
        mapped = self._ids.get(cache_key)
        if mapped is None:
            mapped = self._mapped(cache_key, r, offset, ctx)
        if mapped is _SAME:
            result.schema_unchanged += 1
            return payload
        name, original = ORIGINAL_ID_HEADERS[is_key], mapped[1]
        for header, _ in headers:
            if header == name:  # a later hop: the first cluster's id stays
                break
        else:
            headers.append((name, original))
        result.schema_translated += 1
        # One copy of the payload: the new 5-byte prefix joined with a view of the rest.
        return b"".join((mapped[0], memoryview(payload)[WIRE_HEADER_SIZE:]))

    # -- the id map --------------------------------------------------------------------------

    def _mapped(
        self, cache_key: tuple[str, str, bool, bytes], r: CopyRange, offset: int, ctx: CopyContext
    ) -> tuple[bytes, bytes]:
        """(the copy's first 5 bytes: magic byte and the target's id; the source id as a
        header value), or _SAME: copy as is."""
        with self._lock:
            mapped = self._ids.get(cache_key)
            if mapped is None:
                is_key, id_bytes = cache_key[2], cache_key[3]
                source_id = int.from_bytes(id_bytes, "big")
                try:
                    self._waiting(r, offset, is_key, source_id, ctx)
                    target_id = self._resolve(r, offset, is_key, source_id, ctx)
                except RegistryUnavailableError as exc:
                    self._hold(exc, r, ctx)
                    raise
                self._answered(ctx)
                if target_id in (_UNKNOWN, source_id):
                    mapped = _SAME
                else:
                    prefix = bytes([MAGIC_BYTE]) + target_id.to_bytes(4, "big")
                    mapped = (prefix, str(source_id).encode())
                self._ids[cache_key] = mapped
        return mapped

    def _waiting(
        self, r: CopyRange, offset: int, is_key: bool, source_id: int, ctx: CopyContext
    ) -> None:
        """Raises, without asking, while a registry that did not answer waits for its retry."""
        now = self._clock()
        for registry in (self.source, self.target):
            outage = self._outages.get(registry.alias)
            if outage is not None and now < outage.retry_at:
                raise _unavailable(
                    registry,
                    f"{_where(r, offset, is_key, source_id, ctx)} waits: it did not answer "
                    f"{outage.failures} time(s), last {outage.detail}; asked again in "
                    f"{outage.retry_at - now:.1f} s",
                )

    def _hold(self, exc: RegistryUnavailableError, r: CopyRange, ctx: CopyContext) -> None:
        """A registry did not answer for a record of `r`'s partition: its next retry backed
        off, and the partition's hold said once."""
        outage = self._outages.get(exc.cluster)
        if outage is None or self._clock() >= outage.retry_at:  # it was asked, not waited for
            failures = outage.failures + 1 if outage is not None else 1
            backoff = min(RETRY_MAX_SECONDS, 2.0 ** (failures - 1))
            self._outages[exc.cluster] = _Outage(self._clock() + backoff, failures, exc.reason)
        partition = (r.topic, r.partition)
        if partition not in self._held:
            self._held.add(partition)
            if ctx.notice is not None:
                ctx.notice(f"partition held: {exc}")

    def _answered(self, ctx: CopyContext) -> None:
        """Both registries answered: an outage is over, and its held partitions resume."""
        if not self._outages:
            return
        for alias, outage in sorted(self._outages.items()):
            registry = self.source if alias == self.source.alias else self.target
            if ctx.notice is not None:
                ctx.notice(
                    f"the schema registry of cluster {alias} ({registry.url}) answers again "
                    f"after {outage.failures} failed attempt(s); its held partitions resume"
                )
        self._outages.clear()
        self._held.clear()

    def _resolve(
        self, r: CopyRange, offset: int, is_key: bool, source_id: int, ctx: CopyContext
    ) -> int:
        where = _where(r, offset, is_key, source_id, ctx)
        try:
            versions = self.source.client.get_schema_versions(source_id)
            schema = self.source.client.get_schema(source_id)
        except Exception as exc:  # SchemaRegistryError or the HTTP client's: classified
            if _status(exc) == _NOT_FOUND:
                self.stats.unknown_ids.add(source_id)
                return _UNKNOWN
            raise self._failure(self.source, f"reading {where}", exc, r, offset, ctx) from None
        self.stats.lookups += 1
        subjects = [v.subject for v in versions]
        subject = pick_subject(subjects, r.topic, is_key)
        default = f"{r.topic}-{'key' if is_key else 'value'}"
        subject_on_target = target_subject(subject or default, r.topic, r.remote_topic, is_key)
        try:
            references = [
                self._reference(ref, r, offset, ctx, is_key, where)
                for ref in schema.references or []
            ]
            registered = self._register(subject_on_target, _with_references(schema, references))
        except (KafkaUnavailableError, ReplicationError):
            raise
        except Exception as exc:
            what = f"registering subject '{subject_on_target}' for the {where}"
            raise self._failure(self.target, what, exc, r, offset, ctx) from None
        self.stats.registrations += 1
        try:
            self._copy_level(subject or default, subject_on_target)
        except Exception as exc:
            what = f"copying the compatibility level of subject '{subject or default}' for the"
            raise self._failure(self.target, f"{what} {where}", exc, r, offset, ctx) from None
        return int(registered)

    def _source_default(self) -> str | None:
        """The source registry's global compatibility level, read once."""
        if self._default_level is None:
            self._default_level = str(self.source.client.get_compatibility() or "")
        return self._default_level or None

    def _copy_level(self, subject: str, subject_on_target: str) -> None:
        """The source subject's own compatibility level set on the target subject, once per
        target subject and worker, after ferry's first registration there (the versions ferry
        registers later are checked as the source checked them). A subject without a level of
        its own leaves the target's alone: Confluent's API says so (40408); Apicurio's answers
        such a subject with the global level, so a level equal to the source's global level
        is not copied. A target subject that has the level already is not written; two tasks
        setting it at once is Apicurio's 409 (its rule is created twice), confirmed by a
        read."""
        if subject_on_target in self._levels:
            return
        level = _own_level(self.source.client, subject)
        if level is not None and level == self._source_default():
            level = None  # Apicurio answers a subject without a level with the global one
        if level is not None and _own_level(self.target.client, subject_on_target) != level:
            try:
                self.target.client.set_compatibility(subject_on_target, level)
            except Exception as exc:
                if _status(exc) != _CONFLICT:
                    raise
                if _own_level(self.target.client, subject_on_target) != level:
                    raise
        self._levels.add(subject_on_target)

    def _reference(
        self, ref: Any, r: CopyRange, offset: int, ctx: CopyContext, is_key: bool, where: str
    ) -> Any:
        """A reference of a schema being registered: the referenced schema registered on the
        target first (depth first), the reference pointing at the target's version."""
        from confluent_kafka.schema_registry import SchemaReference

        subject = target_subject(ref.subject, r.topic, r.remote_topic, is_key)
        cache_key = (subject, ref.subject, int(ref.version))
        version = self._references.get(cache_key)
        if version is None:
            try:
                registered = self.source.client.get_version(ref.subject, ref.version)
            except Exception as exc:
                text = f"reading reference '{ref.subject}' version {ref.version} of the {where}"
                raise self._failure(self.source, text, exc, r, offset, ctx) from None
            self.stats.lookups += 1
            schema = registered.schema
            nested = [
                self._reference(n, r, offset, ctx, is_key, where) for n in schema.references or []
            ]
            own = _with_references(schema, nested)
            try:
                self._register(subject, own)
                version = int(self.target.client.lookup_schema(subject, own).version)
            except Exception as exc:
                text = f"registering reference subject '{subject}' for the {where}"
                raise self._failure(self.target, text, exc, r, offset, ctx) from None
            self.stats.registrations += 1
            self._references[cache_key] = version
        return SchemaReference(ref.name, subject, version)

    def _register(self, subject: str, schema: Any) -> int:
        """The target's id of `schema` under `subject`, registered if it is not there yet.

        Looked up first: a schema the subject holds (any version) costs no write. Another
        task of the flow (another partition, another Python worker) may register the same
        schema at the same moment, and Apicurio's Confluent-compatible API is not atomic
        there: it answers one of them 409 "already exists" while the other's registration
        completes, or both succeed and the subject gets the schema twice, as two versions
        under one id. So a 409 is followed by lookups for a few seconds (found: it is the
        id; never found: a real refusal, an incompatible schema, raised), and after a
        registration a later version holding the same id is deleted (`_drop_duplicates`)."""
        client = self.target.client
        try:
            return int(client.lookup_schema(subject, schema).schema_id)
        except Exception as exc:
            if _status(exc) != _NOT_FOUND:
                raise
        try:
            registered = int(client.register_schema(subject, schema))
        except Exception as exc:
            if _status(exc) != _CONFLICT:
                raise
            deadline = self._clock() + CONFLICT_LOOKUP_SECONDS
            while True:
                try:
                    return int(client.lookup_schema(subject, schema).schema_id)
                except Exception:
                    if self._clock() >= deadline:
                        raise exc from None
                    self._sleep(0.2)
        try:
            self._drop_duplicates(subject, registered)
        except Exception:  # the id is right either way: a duplicate left is no reason to hold
            self.stats.duplicates_left += 1
        return registered

    def _drop_duplicates(self, subject: str, schema_id: int) -> None:
        """Versions of `subject` that hold `schema_id` after its first one (two registrations
        raced), deleted: each schema once per subject, as a registry that serialises its
        writes keeps it. Only the newest versions are read (a race leaves its duplicates at
        the end); a version another task deleted a moment ago (404) is gone already. Best
        effort: the copy's id is right either way."""
        client = self.target.client
        versions = sorted(client.get_versions(subject))[-DUPLICATE_WINDOW:]
        holding = [
            v for v in versions if int(client.get_version(subject, v).schema_id) == schema_id
        ]
        for version in holding[1:]:
            for permanent in (False, True):  # soft first, as the Confluent API asks
                try:
                    client.delete_version(subject, version, permanent=permanent)
                except Exception as exc:
                    if _status(exc) != _NOT_FOUND:
                        raise

    @staticmethod
    def _failure(
        registry: RegistryEndpoint,
        what: str,
        exc: Exception,
        r: CopyRange,
        offset: int,
        ctx: CopyContext,
    ) -> RegistryUnavailableError | ReplicationError:
        status = _status(exc)
        detail = f"{what}: {type(exc).__name__}: {exc}"
        if status is not None and 400 <= status < 500 and status not in (401, 403, 408, 429):
            return ReplicationError(
                f"the schema registry of cluster {registry.alias} ({registry.url}) refused "
                f"{detail}; the partition holds, nothing is written with an unmapped id",
                cluster=ctx.source_alias,
                topic=r.topic,
                partition=r.partition,
                offset=offset,
                fix="make the schema acceptable to the target's registry (its compatibility "
                "setting for the subject), or turn sync.schemas.enabled off for the flow",
            )
        return _unavailable(registry, detail)


def _where(r: CopyRange, offset: int, is_key: bool, source_id: int, ctx: CopyContext) -> str:
    return (
        f"{'key' if is_key else 'value'} of the record at cluster {ctx.source_alias} topic "
        f"'{r.topic}' partition {r.partition} offset {offset}, schema id {source_id}"
    )


def _unavailable(registry: RegistryEndpoint, reason: str) -> RegistryUnavailableError:
    return RegistryUnavailableError(registry.alias, registry.url, reason)


def _own_level(client: Any, subject: str) -> str | None:
    """The subject's own compatibility level; None: it has none (the registry's default
    applies: Confluent's 40408, Apicurio's 404 for a subject without a compatibility rule)."""
    try:
        level = client.get_compatibility(subject)
    except Exception as exc:
        if _status(exc) == _NOT_FOUND:
            return None
        raise
    return str(level) if level else None


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "http_status_code", None)
    return int(status) if isinstance(status, int) and status > 0 else None


def _with_references(schema: Any, references: list[Any]) -> Any:
    from confluent_kafka.schema_registry import Schema

    return Schema(schema.schema_str, schema.schema_type or "AVRO", references)


# -- one translator per flow and Python worker --------------------------------------------

_translators: dict[str, SchemaTranslator] = {}
_translators_lock = threading.Lock()


def translator_for(
    source_alias: str,
    source_conf: Mapping[str, str],
    target_alias: str,
    target_conf: Mapping[str, str],
) -> SchemaTranslator:
    """The worker's translator for these two registries (its id map lives as long as the
    Python worker: a schema is looked up once per worker, not once per task)."""
    key = json.dumps([source_alias, dict(source_conf), target_alias, dict(target_conf)])
    with _translators_lock:
        translator = _translators.get(key)
        if translator is None:
            translator = SchemaTranslator(
                RegistryEndpoint(source_alias, source_conf["url"], _client(source_conf)),
                RegistryEndpoint(target_alias, target_conf["url"], _client(target_conf)),
            )
            _translators[key] = translator
        return translator


def check_registry(alias: str, conf: Mapping[str, str]) -> None:
    """Before a run copies: the cluster's registry answers (its subjects listed), so a wrong
    URL or credentials are said at start, not first met by a copy task."""
    try:
        _client(conf).get_subjects()
    except Exception as exc:  # SchemaRegistryError or the HTTP client's: classified
        detail = f"listing its subjects: {type(exc).__name__}: {exc}"
        if _status(exc) in (401, 403):
            raise FerryError(
                f"the schema registry of cluster {alias} ({conf['url']}) refused ferry: "
                f"{detail}. Fix: {alias}.schema.registry.basic.auth.user.info or "
                f"{alias}.schema.registry.bearer.auth.*"
            ) from None
        raise KafkaUnavailableError(
            alias, conf["url"], detail, what="schema registry did not answer"
        ) from None


def _client(conf: Mapping[str, str]) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    settings: dict[str, Any] = {"timeout": 10, "max.retries": 1, **conf}
    for number in ("timeout", "max.retries"):
        settings[number] = float(settings[number])
    settings["max.retries"] = int(settings["max.retries"])
    return SchemaRegistryClient(settings)
