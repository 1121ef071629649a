"""The schema translator on the copy path, against in-memory registries (the real ones, with
real brokers, are in tests/integration/test_schema_registries.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka.schema_registry import RegisteredSchema, Schema, SchemaReference
from confluent_kafka.schema_registry.common.schema_registry_client import SchemaVersion
from confluent_kafka.schema_registry.error import SchemaRegistryError

from ferry.engine.copy.schemas import RegistryEndpoint, SchemaTranslator
from ferry.engine.copy.types import CopyContext, CopyRange, PartitionResult
from ferry.errors import KafkaUnavailableError, ReplicationError


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
        if self.races:
            self.races -= 1
            raise SchemaRegistryError(409, 0, "An artifact version already exists")
        return sid

    def lookup_schema(self, subject: str, schema: Schema) -> RegisteredSchema:
        self._call()
        sid = next(i for i in self.subjects[subject] if self.by_id[i] == schema)
        version = self.subjects[subject].index(sid) + 1
        return RegisteredSchema(subject, version, sid, None, schema)

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
    with pytest.raises(KafkaUnavailableError) as info:
        translator.translate(R, 42, None, value, [], result, CTX)
    text = str(info.value)
    for part in ("http://a-registry", "topic 'orders'", "partition 3", "offset 42", f"id {sid}"):
        assert part in text
    source.down = False  # it answers again: the same record goes through
    _, copy = translator.translate(R, 42, None, value, [], result, CTX)
    assert copy is not None and copy != value


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
    with pytest.raises(ReplicationError) as info:
        translator.translate(R, 5, None, value, [], PartitionResult("orders", 3, 0, 9), CTX)
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
