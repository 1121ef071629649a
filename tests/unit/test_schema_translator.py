"""The schema translator on the copy path, against in-memory registries (the real ones, with
real brokers, are in tests/integration/test_schema_registries.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaReference
from confluent_kafka.schema_registry.common.schema_registry_client import SchemaVersion
from confluent_kafka.schema_registry.error import SchemaRegistryError

from ferry.engine.copy.deliveries import DeliveryTracker
from ferry.engine.copy.python_loop import copy_bin
from ferry.engine.copy.schemas import RegistryEndpoint, RegistryUnavailableError, SchemaTranslator
from ferry.engine.copy.types import OPEN, CopyContext, CopyRange, PartitionResult, Slice
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from tests.unit.fake_kafka import FakeConsumer, FakeProducer, Log, Rec, log_of


@dataclass
class FakeRegistry:
    """Ids per content across subjects, as Confluent's and Apicurio's registries give them."""

    next_id: int = 1
    by_id: dict[int, Schema] = field(default_factory=dict)
    subjects: dict[str, list[int]] = field(default_factory=dict)
    calls: int = 0
    down: bool = False
    refuse: bool = False
    races: int = 0  # registrations answered 409 although they were made (another task won)
    levels: dict[str, str] = field(default_factory=dict)  # subjects' own compatibility levels
    level_races: int = 0  # level writes answered 409 although made (another task's rule)
    duplicates: int = 0  # registrations that add their version twice (Apicurio's race)
    deleted: set[int] = field(default_factory=set)  # versions deleted (any subject: tests use one)

    def get_compatibility(self, subject: str | None = None) -> str:
        self._call()
        if subject is None:
            return self.levels.get("", "BACKWARD")  # the global level
        if subject not in self.levels:  # Confluent: 40408, no subject-level config
            raise SchemaRegistryError(404, 40408, "Subject does not have subject-level config")
        return self.levels[subject]

    def set_compatibility(self, subject: str, level: str) -> dict[str, str]:
        self._call()
        self.levels[subject] = level
        if self.level_races:
            self.level_races -= 1
            raise SchemaRegistryError(409, 409, "Rule of type COMPATIBILITY already exists")
        return {"compatibility": level}

    def _call(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("connection refused")

    def register_schema(self, subject: str, schema: Schema) -> int:
        self._call()
        if self.refuse:
            raise SchemaRegistryError(409, 409, "incompatible schema")
        sid = next((i for i, s in self.by_id.items() if s == schema), None)
        if sid is None:
            sid, self.next_id = self.next_id, self.next_id + 1
            self.by_id[sid] = schema
        versions = self.subjects.setdefault(subject, [])
        if sid not in versions:
            versions.append(sid)
            if self.duplicates:  # another task's registration of it, at the same moment
                self.duplicates -= 1
                versions.append(sid)
        if self.races:
            self.races -= 1
            raise SchemaRegistryError(409, 0, "An artifact version already exists")
        return sid

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        self._call()
        sid = next((i for i in self.subjects.get(subject, []) if self.by_id[i] == schema), None)
        if sid is None:  # Confluent: 40401 subject not found, 40403 schema not found
            raise SchemaRegistryError(404, 40403, "Schema not found")
        version = self.subjects[subject].index(sid) + 1
        return RegisteredSchema(subject, version, sid, None, schema)

    def get_versions(self, subject: str) -> list[int]:
        self._call()
        return [v for v in range(1, len(self.subjects[subject]) + 1) if v not in self.deleted]

    def delete_version(self, subject: str, version: int, permanent: bool = False) -> int:
        self._call()
        self.deleted.add(version)
        return version

    def get_schema(self, sid: int) -> Schema:
        self._call()
        if sid not in self.by_id:
            raise SchemaRegistryError(404, 40403, "Schema not found")
        return self.by_id[sid]

    def get_schema_versions(self, sid: int) -> list[Any]:
        self._call()
        if sid not in self.by_id:
            raise SchemaRegistryError(404, 40403, "Schema not found")
        return [
            SchemaVersion(subject, ids.index(sid) + 1)
            for subject, ids in self.subjects.items()
            if sid in ids
        ]

    def get_version(self, subject: str, version: int) -> RegisteredSchema:
        self._call()
        sid = self.subjects[subject][version - 1]
        return RegisteredSchema(subject, version, sid, None, self.by_id[sid])


CTX = CopyContext("A", "a:9092", "ca", "B", "b:9092", "cb")
R = CopyRange("orders", 3, 0, 100, "A.orders", 1_000_000)
AVRO = Schema('{"type":"record","name":"O","fields":[{"name":"n","type":"long"}]}', "AVRO")


def _pair() -> tuple[FakeRegistry, FakeRegistry, SchemaTranslator]:
    source, target = FakeRegistry(), FakeRegistry()
    for n in range(5):  # the target's own schemas take ids 1..5: ids collide
        target.register_schema(f"local-{n}", Schema(f'"string{n}"', "AVRO"))
    translator = SchemaTranslator(
        RegistryEndpoint("A", "http://a-registry", source),
        RegistryEndpoint("B", "http://b-registry", target),
    )
    return source, target, translator


def test_ids_rewritten_once_per_schema_with_the_original_in_a_header() -> None:
    source, target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    result = PartitionResult("orders", 3, 0, 100)
    calls = []
    for offset in range(50):
        headers: list[tuple[str, bytes | None]] = []
        value = b"\x00" + sid.to_bytes(4, "big") + b"\x02payload"
        key, copy = translator.translate(R, offset, b"k", value, headers, result, CTX)
        assert key == b"k"
        assert copy is not None and copy[5:] == value[5:]
        tid = int.from_bytes(copy[1:5], "big")
        assert target.by_id[tid] == AVRO and tid != sid
        assert headers == [("ferry.schema.id.value", str(sid).encode())]
        calls.append(source.calls + target.calls)
    assert len(set(calls)) == 1  # the registries were asked for the first record only
    assert "A.orders-value" in target.subjects
    assert result.schema_translated == 50 and result.schema_unchanged == 50  # the plain keys


def test_unknown_ids_and_plain_payloads_pass_unchanged() -> None:
    _source, _target, translator = _pair()
    result = PartitionResult("orders", 3, 0, 100)
    odd = b"\x00\x00\x00\x00\x63rest"  # looks encoded; the source knows no id 99
    headers: list[tuple[str, bytes | None]] = []
    assert translator.translate(R, 7, None, odd, headers, result, CTX) == (None, odd)
    assert translator.translate(R, 8, b"\x00\x01", b"json", headers, result, CTX) == (
        b"\x00\x01",
        b"json",
    )
    assert headers == [] and result.schema_unchanged == 3
    assert translator.stats.unknown_ids == {99}


def test_references_registered_first_under_their_own_subjects() -> None:
    source, target, translator = _pair()
    money = Schema('syntax = "proto3"; message Money { int64 cents = 1; }', "PROTOBUF")
    source.register_schema("money.proto", money)
    pay = Schema(
        'syntax = "proto3"; import "money.proto"; message Pay { Money m = 1; }',
        "PROTOBUF",
        [SchemaReference("money.proto", "money.proto", 1)],
    )
    sid = source.register_schema("orders-value", pay)
    result = PartitionResult("orders", 3, 0, 100)
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x00\x0a\x00"
    _, copy = translator.translate(R, 0, None, value, [], result, CTX)
    assert copy is not None
    registered = target.by_id[int.from_bytes(copy[1:5], "big")]
    assert registered.references == [SchemaReference("money.proto", "money.proto", 1)]
    assert target.by_id[target.subjects["money.proto"][0]] == money


def test_a_registry_down_holds_the_record_naming_where() -> None:
    source, _target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    source.down = True
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    result = PartitionResult("orders", 3, 0, 100)
    now = [0.0]
    translator._clock = lambda: now[0]
    with pytest.raises(KafkaUnavailableError) as info:
        translator.translate(R, 42, None, value, [], result, CTX)
    text = str(info.value)
    for part in ("http://a-registry", "topic 'orders'", "partition 3", "offset 42", f"id {sid}"):
        assert part in text
    # Not asked again before its backoff (1 s, then 2): a hung registry costs no timeout per
    # record; the hold still names where.
    now[0] = 0.5
    calls = source.calls
    with pytest.raises(RegistryUnavailableError) as info:
        translator.translate(R, 42, None, value, [], result, CTX)
    assert source.calls == calls and "offset 42" in str(info.value)
    source.down = False  # it answers again: after the backoff the same record goes through
    now[0] = 30.0
    _, copy = translator.translate(R, 42, None, value, [], result, CTX)
    assert copy is not None and copy != value


def test_a_lease_holds_only_the_partition_whose_schema_needs_a_registry_down() -> None:
    """A source registry that does not answer: the partition with an unmapped id holds at
    that record (said once), the bin's other partitions copy on; when the registry answers,
    the held partition resumes at its held record, each record copied once."""
    source, _target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    encoded = Log([Rec(o, b"k", b"\x00" + sid.to_bytes(4, "big") + b"\x02") for o in range(6)])
    plain = log_of(*range(6))
    consumer = FakeConsumer({("orders", 0): encoded, ("orders", 1): plain})
    producer, tracker = FakeProducer(), DeliveryTracker()
    notices: list[str] = []
    ctx = replace(CTX, translator=translator, notice=notices.append)
    now = [0.0]
    translator._clock = lambda: now[0]
    # Offsets 0 and 1 of partition 0 are mapped before the registry goes away.
    work = [CopyRange("orders", p, 0, OPEN, "A.orders", 1_000_000) for p in (0, 1)]
    results = copy_bin(consumer, producer, tracker, work, ctx, Slice(0.3))
    assert {(r.partition, r.end) for r in results} == {(0, 6), (1, 6)}
    source.down = True
    translator._ids.clear()  # a worker that has not met the id yet
    encoded.records += [Rec(o, b"k", b"\x00" + sid.to_bytes(4, "big") + b"\x02") for o in (6, 7)]
    plain.records += [Rec(o, b"k", b"v") for o in (6, 7)]
    encoded.end = plain.end = 8
    ends = {0: 6, 1: 6}
    for _ in range(3):  # slices while it does not answer
        work = [CopyRange("orders", p, ends[p], OPEN, "A.orders", 1_000_000) for p in (0, 1)]
        results = copy_bin(consumer, producer, tracker, work, ctx, Slice(0.2, continuing=True))
        ends = {r.partition: r.end for r in results}
        assert ends == {0: 6, 1: 8}
        now[0] += 0.5
    assert len(producer.logs[("A.orders", 0)]) == 6 and len(producer.logs[("A.orders", 1)]) == 8
    assert len(notices) == 1, notices
    for part in ("http://a-registry", "topic 'orders'", "partition 0", "offset 6"):
        assert part in notices[0]
    source.down = False
    now[0] += 30
    work = [CopyRange("orders", p, ends[p], OPEN, "A.orders", 1_000_000) for p in (0, 1)]
    results = copy_bin(consumer, producer, tracker, work, ctx, Slice(0.2, continuing=True))
    assert {r.partition: r.end for r in results} == {0: 8, 1: 8}
    copies = producer.logs[("A.orders", 0)]
    origins = [
        Origin.from_bytes(dict(c.headers or [])[ORIGIN_HEADER] or b"").offset for c in copies
    ]
    assert origins == list(range(8))
    assert all(c.value is not None and c.value[1:5] != sid.to_bytes(4, "big") for c in copies)
    assert len(notices) == 2 and "answers again" in notices[1]


def test_a_bounded_range_fails_its_task_when_a_registry_does_not_answer() -> None:
    source, _target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    source.down = True
    log = Log([Rec(o, b"k", b"\x00" + sid.to_bytes(4, "big") + b"\x02") for o in range(3)])
    consumer, producer = FakeConsumer({("orders", 0): log}), FakeProducer()
    ctx = replace(CTX, translator=translator)
    work = [CopyRange("orders", 0, 0, 3, "A.orders", 1_000_000)]
    with pytest.raises(RegistryUnavailableError):
        copy_bin(consumer, producer, DeliveryTracker(), work, ctx)
    assert producer.logs.get(("A.orders", 0), []) == []


def test_a_registration_another_task_won_is_looked_up() -> None:
    source, target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    target.races = 1
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    _, copy = translator.translate(R, 5, None, value, [], PartitionResult("orders", 3, 0, 9), CTX)
    assert copy is not None and target.by_id[int.from_bytes(copy[1:5], "big")] == AVRO


def test_a_schema_the_target_refuses_halts_the_partition() -> None:
    source, target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    target.refuse = True
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    now = [0.0]  # a 409 is looked up for a few seconds (another task's registration) first
    translator._clock = lambda: now[0]
    translator._sleep = lambda seconds: now.__setitem__(0, now[0] + seconds)
    with pytest.raises(ReplicationError) as info:
        translator.translate(R, 5, None, value, [], PartitionResult("orders", 3, 0, 9), CTX)
    assert now[0] >= 5.0
    assert "cluster A, topic orders, partition 3, offset 5" in str(info.value)
    assert "http://b-registry" in str(info.value)


def test_a_registry_that_does_not_answer_is_said_before_the_run_copies() -> None:
    from ferry.config.model import FlowConfig
    from ferry.engine.copy.schemas import check_registry
    from ferry.engine.preflight import check_copier
    from ferry.local.broker import free_port

    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"  # nothing listens there
    with pytest.raises(KafkaUnavailableError) as info:
        check_registry("B", {"url": url, "timeout": "2"})
    assert str(info.value).startswith(f"cluster B ({url}) schema registry did not answer")
    notices: list[str] = []
    check_copier(FlowConfig(source="A", target="B"), notices.append, syncs_schemas=True)
    assert notices == [
        "flow A->B: copying with the Python loop (schema ids are translated there; the native "
        "loop copies bytes unchanged)"
    ]


def test_a_subjects_own_compatibility_level_follows_it_after_its_first_registration() -> None:
    source, target, translator = _pair()
    source.levels["orders-value"] = "FORWARD_TRANSITIVE"
    source.levels["orders-key"] = "BACKWARD"  # Apicurio's answer for no level: the global one
    sid = source.register_schema("orders-value", AVRO)
    keyed = source.register_schema("orders-key", Schema('"string"', "AVRO"))
    written: list[tuple[str, str]] = []
    original = target.set_compatibility

    def recording(subject: str, level: str) -> dict[str, str]:
        assert subject in target.subjects, "a level set before the subject exists"
        written.append((subject, level))
        return original(subject, level)

    target.set_compatibility = recording  # type: ignore[method-assign]
    result = PartitionResult("orders", 3, 0, 100)
    for offset in range(3):
        value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
        key = b"\x00" + keyed.to_bytes(4, "big") + b"\x02k"
        translator.translate(R, offset, key, value, [], result, CTX)
    # The value's subject has a level of its own; the key's none (the global level): the
    # target's default stays.
    assert written == [("A.orders-value", "FORWARD_TRANSITIVE")]
    assert target.levels == {"A.orders-value": "FORWARD_TRANSITIVE"}
    second = source.register_schema("orders-value", Schema('"long"', "AVRO"))  # a new version
    translator.translate(R, 9, None, b"\x00" + second.to_bytes(4, "big") + b"\x02", [], result, CTX)
    assert written == [("A.orders-value", "FORWARD_TRANSITIVE")]  # once per subject


def test_a_level_another_task_set_a_moment_ago_is_confirmed_not_failed() -> None:
    source, target, translator = _pair()
    source.levels["orders-value"] = "FULL"
    sid = source.register_schema("orders-value", AVRO)
    target.level_races = 1  # Apicurio's 409: the rule was created by another task meanwhile
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    _, copy = translator.translate(R, 0, None, value, [], PartitionResult("orders", 3, 0, 9), CTX)
    assert copy is not None and target.levels == {"A.orders-value": "FULL"}
    # A different level set there meanwhile is no confirmation: the partition halts.
    _source, target2, translator2 = _pair()
    translator2.source.client.levels["orders-value"] = "FULL"
    sid2 = translator2.source.client.register_schema("orders-value", AVRO)
    target2.level_races = 1

    def other(subject: str, level: str) -> dict[str, str]:
        target2.levels[subject] = "NONE"
        raise SchemaRegistryError(409, 409, "Rule of type COMPATIBILITY already exists")

    target2.set_compatibility = other  # type: ignore[method-assign]
    value2 = b"\x00" + sid2.to_bytes(4, "big") + b"\x02"
    with pytest.raises(ReplicationError) as info:
        translator2.translate(R, 0, None, value2, [], PartitionResult("orders", 3, 0, 9), CTX)
    assert "compatibility level" in str(info.value) and "http://b-registry" in str(info.value)


def test_a_version_two_racing_registrations_both_added_is_deleted_again() -> None:
    """Apicurio's ccompat register is not atomic: two tasks registering one new schema at
    once may both add a version (one id). The later version is deleted, soft then hard."""
    source, target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    target.duplicates = 1
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    _, copy = translator.translate(R, 0, None, value, [], PartitionResult("orders", 3, 0, 9), CTX)
    assert copy is not None
    assert target.subjects["A.orders-value"] == [int.from_bytes(copy[1:5], "big")] * 2
    assert target.deleted == {2} and target.get_versions("A.orders-value") == [1]


def test_a_schema_the_target_subject_holds_is_looked_up_not_registered_again() -> None:
    source, target, translator = _pair()
    sid = source.register_schema("orders-value", AVRO)
    held = target.register_schema("A.orders-value", AVRO)
    target.register_schema("A.orders-value", Schema('"long"', "AVRO"))  # a newer version
    registered: list[str] = []
    original = target.register_schema

    def counting(subject: str, schema: Schema) -> int:
        registered.append(subject)
        return original(subject, schema)

    target.register_schema = counting  # type: ignore[method-assign]
    value = b"\x00" + sid.to_bytes(4, "big") + b"\x02"
    _key, copy = translator.translate(
        R, 0, None, value, [], PartitionResult("orders", 3, 0, 9), CTX
    )
    assert copy is not None and int.from_bytes(copy[1:5], "big") == held
    assert registered == [] and len(target.subjects["A.orders-value"]) == 2
