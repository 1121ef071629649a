"""Schemas follow the data: real brokers, real registries (Apicurio Registry, one per cluster).

Records written on A through A's registry (Avro in two versions, the second registered while
ferry runs; Protobuf whose schema references another; JSON Schema) and plain records are
copied exactly once to B, whose registry already holds schemas of its own, so A's ids name
other schemas there. A consumer on B decoding through B's registry must get every record as
it was written on A, plain records byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ferry.config import load_config
from ferry.engine.flow_state import FlowState
from ferry.engine.runner import Runner
from ferry.kafka.provenance import Origin
from ferry.kafka.schema_wire import schema_id
from ferry.local.cluster import LocalCluster
from ferry.local.schema_registry import RegistryProcess, start_registries, stop_registries
from tests.ferry_cli import run_ferry
from tests.integration.group_helpers import commit_group, committed_offsets
from tests.integration.kafka_helpers import create_topic, wait_for
from tests.integration.replication_setup import run_beside, run_once, write_config

pytestmark = pytest.mark.schemas

PARTITIONS = 2
AVRO_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "ferrytest",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
AVRO_V2 = {
    **AVRO_V1,
    "fields": [*AVRO_V1["fields"], {"name": "note", "type": "string", "default": ""}],
}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["sensor", "celsius"],
}


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RegistryProcess]]:
    """A registry beside each of the session's clusters A and B."""
    directory = tmp_path_factory.mktemp("registries")
    started = start_registries(["A", "B"], directory)
    try:
        yield started
    finally:
        assert set(stop_registries(directory)) == {"A", "B"}
        assert not any(r.is_running() for r in started.values())


def _client(registry: RegistryProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def _protobuf_classes() -> tuple[Any, Any]:
    """Payment, whose schema imports Money's file: a schema with a reference."""
    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(
        name="ferrytest/money.proto", package="ferrytest", syntax="proto3"
    )
    field = descriptor_pb2.FieldDescriptorProto
    optional = field.LABEL_OPTIONAL
    m = money.message_type.add(name="Money")
    m.field.add(name="cents", number=1, type=field.TYPE_INT64, label=optional)
    m.field.add(name="currency", number=2, type=field.TYPE_STRING, label=optional)
    pool.Add(money)
    payment = descriptor_pb2.FileDescriptorProto(
        name="ferrytest/payment.proto",
        package="ferrytest",
        syntax="proto3",
        dependency=["ferrytest/money.proto"],
    )
    p = payment.message_type.add(name="Payment")
    p.field.add(name="id", number=1, type=field.TYPE_STRING, label=optional)
    p.field.add(
        name="amount",
        number=2,
        type=field.TYPE_MESSAGE,
        type_name=".ferrytest.Money",
        label=optional,
    )
    pool.Add(payment)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("ferrytest.Payment")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("ferrytest.Money")),
    )


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, key=f"k{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def _read(bootstrap: str, topic: str) -> dict[int, list[Any]]:
    """Every record of every partition, in order (read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "schemas-test-reader",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    out: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
    found = consumer.list_topics(topic, timeout=10).topics.get(topic)
    if found is None or found.error is not None:  # not created on the target yet
        consumer.close()
        return out
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    ended: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(ended) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: no end of partitions within 60 s"
            for msg in consumer.consume(500, 1.0):
                if msg.error() is not None:
                    ended.add(msg.partition())
                    continue
                out[msg.partition()].append(msg)
    finally:
        consumer.close()
    return out


def _count(bootstrap: str, topic: str) -> int:
    """Records a read_committed consumer reads (watermarks count transaction markers too)."""
    return sum(len(msgs) for msgs in _read(bootstrap, topic).values())


def _in_order(values: list[Any]) -> dict[int, list[Any]]:
    """What each partition holds when value i went to partition i % PARTITIONS."""
    return {p: values[p::PARTITIONS] for p in range(PARTITIONS)}


def test_records_decode_on_the_target_through_its_registry_exactly_once(
    kafka_clusters: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    source, target = _client(registries["A"]), _client(registries["B"])
    # B's registry holds schemas of its own: A's ids name other schemas there.
    for n in range(12):
        local = {"type": "enum", "name": f"Local{n}", "symbols": ["X"]}
        target.register_schema(f"{topic_name}-local-{n}-value", Schema(json.dumps(local), "AVRO"))
    topics = {kind: f"{topic_name}-{kind}" for kind in ("avro", "proto", "json", "plain")}
    for topic in topics.values():
        create_topic(a, topic, PARTITIONS)
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=f"{topic_name}-.*",
            **{
                "exactly.once.source.support": "enabled",
                "A.schema.registry.url": registries["A"].url,
                "B.schema.registry.url": registries["B"].url,
            },
        )
    )
    assert config.syncs_schemas(config.flow("A", "B"))

    payment, money = _protobuf_classes()
    avro_v1 = AvroSerializer(source, json.dumps(AVRO_V1))
    avro_v2 = AvroSerializer(source, json.dumps(AVRO_V2))
    proto = ProtobufSerializer(payment, source, {"use.deprecated.format": False})
    js = JSONSerializer(json.dumps(JSON_SCHEMA), source)

    def ctx(topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.VALUE)

    orders_v1 = [{"id": i, "item": f"item-{i}"} for i in range(120)]
    orders_v2 = [{"id": 1000 + i, "item": f"late-{i}", "note": f"n{i}"} for i in range(80)]
    payments = [payment(id=f"p{i}", amount=money(cents=i * 7, currency="EUR")) for i in range(60)]
    readings = [{"sensor": f"s{i % 3}", "celsius": i / 4} for i in range(60)]
    # Plain bytes, and bytes that only look registry-encoded (an id A's registry never gave).
    plain = [f"plain-{i}".encode() for i in range(50)]
    plain += [b"\x00\x00\x0f\x42\x3f" + bytes([i]) * 3 for i in range(10)]
    expected = {"avro": len(orders_v1) + len(orders_v2), "proto": 60, "json": 60, "plain": 60}

    def copied(kind: str, count: int) -> None:
        remote = f"A.{topics[kind]}"
        wait_for(lambda: _count(b, remote) == count, 120, f"{count} records in {remote}")

    def meanwhile() -> None:
        _produce(a, topics["avro"], [avro_v1(o, ctx(topics["avro"])) for o in orders_v1])
        _produce(a, topics["proto"], [proto(m, ctx(topics["proto"])) for m in payments])
        _produce(a, topics["json"], [js(r, ctx(topics["json"])) for r in readings])
        _produce(a, topics["plain"], plain)
        for kind in ("proto", "json", "plain"):
            copied(kind, expected[kind])
        copied("avro", len(orders_v1))
        # A new version, registered on A while ferry runs, by the records that use it.
        _produce(a, topics["avro"], [avro_v2(o, ctx(topics["avro"])) for o in orders_v2])
        copied("avro", expected["avro"])

    run_beside(Runner(config, spark=spark), meanwhile)

    decoders = {
        "avro": AvroDeserializer(target),
        "proto": ProtobufDeserializer(payment, {"use.deprecated.format": False}, target),
        "json": JSONDeserializer(None, schema_registry_client=target),
    }
    v1, v2 = _in_order(orders_v1), _in_order(orders_v2)
    written = {
        "avro": {p: v1[p] + v2[p] for p in range(PARTITIONS)},
        "proto": _in_order(payments),
        "json": _in_order(readings),
        "plain": _in_order(plain),
    }
    source_ids: dict[str, set[int]] = {}
    for kind, topic in topics.items():
        remote = f"A.{topic}"
        records = _read(b, remote)
        for p in range(PARTITIONS):
            msgs = records[p]
            # Exactly once: every source offset of the partition once, in order.
            origins = [Origin.from_bytes(dict(m.headers())["ferry.origin"]).offset for m in msgs]
            assert origins == list(range(len(written[kind][p]))), f"{remote} partition {p}"
            if kind == "plain":
                assert [m.value() for m in msgs] == written[kind][p]
                assert all("ferry.schema.id.value" not in dict(m.headers()) for m in msgs)
                continue
            for m, original in zip(msgs, written[kind][p], strict=True):
                headers = dict(m.headers())
                source_id = int(headers["ferry.schema.id.value"])
                target_id = schema_id(m.value())
                assert target_id is not None and target_id != source_id, (
                    f"{remote} offset {m.offset()}: id {source_id} kept"
                )
                source_ids.setdefault(kind, set()).add(source_id)
                decoded = decoders[kind](
                    m.value(), SerializationContext(remote, MessageField.VALUE)
                )
                assert decoded == original, f"{remote} partition {p} offset {m.offset()}"
    assert len(source_ids["avro"]) == 2  # both versions, each translated
    # On B, under the remote topic's subject: both Avro versions; Protobuf's import under its
    # own subject.
    assert target.get_versions(f"A.{topics['avro']}-value") == [1, 2]
    assert "ferrytest/money.proto" in target.get_subjects()
    stats = FlowState(tmp_path / "state" / "A-to-B").stats()["partitions"]
    plain_unchanged = sum(
        stats[f"{topics['plain']}:{p}"].get("schema_unchanged", 0) for p in range(PARTITIONS)
    )
    translated = sum(
        entry.get("schema_translated", 0)
        for key, entry in stats.items()
        if key.rsplit(":", 1)[0] in (topics["avro"], topics["proto"], topics["json"])
    )
    assert plain_unchanged == 2 * expected["plain"]  # keys (k<i>) and values, each copied once
    assert translated == expected["avro"] + expected["proto"] + expected["json"]


def test_a_registry_that_stops_answering_holds_the_copy_and_it_resumes(
    kafka_clusters: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """B's registry frozen (SIGSTOP: a hung registry) while a record with a new schema waits:
    nothing is written with an unmapped id, the run says which registry holds the copy, and
    once the registry answers again every record arrives once and decodes on B."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    source, target = _client(registries["A"]), _client(registries["B"])
    topic, remote = f"{topic_name}-held", f"A.{topic_name}-held"
    create_topic(a, topic, PARTITIONS)
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=topic,
            **{
                "exactly.once.source.support": "enabled",
                "A.schema.registry.url": registries["A"].url,
                "B.schema.registry.url": registries["B"].url,
                "B.schema.registry.timeout": 2,  # a frozen registry is found out quickly
            },
        )
    )
    held_v1 = {**AVRO_V1, "name": "Held"}
    held_v2 = {**AVRO_V2, "name": "Held"}
    first = [{"id": i, "item": f"first-{i}"} for i in range(20)]
    later = [{"id": 100 + i, "item": f"later-{i}", "note": "v2"} for i in range(20)]
    ctx = SerializationContext(topic, MessageField.VALUE)
    notices: list[str] = []
    frozen = registries["B"]

    def meanwhile() -> None:
        serialize = AvroSerializer(source, json.dumps(held_v1))
        _produce(a, topic, [serialize(o, ctx) for o in first])
        wait_for(lambda: _count(b, remote) == len(first), 120, f"{remote}: first copies")
        os.kill(frozen.pid, signal.SIGSTOP)
        try:
            serialize = AvroSerializer(source, json.dumps(held_v2))  # a new id on A
            _produce(a, topic, [serialize(o, ctx) for o in later])
            wait_for(
                lambda: any(frozen.url in n for n in notices),
                180,
                f"a notice naming the registry that holds the copy ({frozen.url})",
            )
            assert _count(b, remote) == len(first), "copied without B's registry"
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        wait_for(
            lambda: _count(b, remote) == len(first) + len(later),
            240,
            f"{remote}: the held records copied once the registry answers",
        )

    run_beside(Runner(config, spark=spark, on_notice=notices.append), meanwhile)

    held = next(n for n in notices if frozen.url in n)
    assert "schema registry did not answer" in held and f"topic '{topic}'" in held, held
    decode = AvroDeserializer(target)
    records = _read(b, remote)
    f, s = _in_order(first), _in_order(later)
    for p in range(PARTITIONS):
        origins = [Origin.from_bytes(dict(m.headers())["ferry.origin"]).offset for m in records[p]]
        assert origins == list(range(len(f[p]) + len(s[p]))), f"{remote} partition {p}"
        decoded = [
            decode(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in records[p]
        ]
        assert decoded == f[p] + s[p]


def test_a_group_failed_over_to_the_target_decodes_from_its_position(
    kafka_clusters: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """`ferry run --once` (bounded exactly-once batches) with translation, then `ferry
    failover` of a group: on B it resumes at its exact position and decodes every record left
    through B's registry."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    source, target = _client(registries["A"]), _client(registries["B"])
    topic, remote = f"{topic_name}-fo", f"A.{topic_name}-fo"
    group = f"{topic_name}-app"
    create_topic(a, topic, PARTITIONS)
    orders = [{"id": i, "item": f"fo-{i}"} for i in range(60)]
    serialize = AvroSerializer(source, json.dumps({**AVRO_V1, "name": "FailedOver"}))
    _produce(
        a, topic, [serialize(o, SerializationContext(topic, MessageField.VALUE)) for o in orders]
    )
    consumed = {(topic, p): 12 + p for p in range(PARTITIONS)}  # where the app stopped on A
    commit_group(a, group, consumed)
    config = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic,
        groups=group,
        **{
            "exactly.once.source.support": "enabled",
            "A.schema.registry.url": registries["A"].url,
            "B.schema.registry.url": registries["B"].url,
        },
    )
    run_once(config, spark)

    result = run_ferry("failover", "-c", str(config), "--group", group, "--from", "A", "--to", "B")
    assert result.returncode == 0, result.stderr
    positions = committed_offsets(b, group)
    assert set(positions) == {(remote, p) for p in range(PARTITIONS)}
    decode = AvroDeserializer(target)
    written = _in_order(orders)
    records = _read(b, remote)
    for p in range(PARTITIONS):
        left = [m for m in records[p] if m.offset() >= positions[(remote, p)]]
        decoded = [
            decode(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in left
        ]
        assert decoded == written[p][consumed[(topic, p)] :], f"{remote} partition {p}"
