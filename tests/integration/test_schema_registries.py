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
from ferry.local.schema_registry import (
    RegistryProcess,
    restart_registry,
    start_registries,
    stop_registries,
)
from ferry.ops.status import flow_status
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import module_clusters
from tests.integration.group_helpers import commit_group, committed_offsets
from tests.integration.kafka_helpers import create_topic, wait_for
from tests.integration.replication_setup import run_beside, run_once, write_config
from tests.integration.runs_until import flow_configs, run_in_order

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


cluster_c = module_clusters("C")  # the third hop of a chain


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, RegistryProcess]]:
    """A registry beside each of the session's clusters A and B, and the chain's C (started
    together: one start's wait)."""
    directory = tmp_path_factory.mktemp("registries")
    started = start_registries(["A", "B", "C"], directory)
    try:
        yield started
    finally:
        assert set(stop_registries(directory)) == {"A", "B", "C"}
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
    # A subject with a compatibility level of its own: the level follows it to B.
    json_subject = f"{topics['json']}-value"
    source.register_schema(json_subject, Schema(json.dumps(JSON_SCHEMA), "JSON"))
    source.set_compatibility(json_subject, "FORWARD")
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
    assert target.get_compatibility(f"A.{json_subject}") == "FORWARD"
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


def test_a_registry_that_stops_answering_holds_only_its_partitions_and_they_resume(
    kafka_clusters: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """B's registry frozen (SIGSTOP: a hung registry), then A's stopped by pid and started
    again, each while records with a new schema wait: nothing is written with an unmapped
    id, the run names the registry and the held partition, the plain records of the same bin
    are copied meanwhile, and once the registry answers the held records arrive once and
    decode on B."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    source, target = _client(registries["A"]), _client(registries["B"])
    topic, remote = f"{topic_name}-held", f"A.{topic_name}-held"
    plain_topic, plain_remote = f"{topic_name}-free", f"A.{topic_name}-free"
    create_topic(a, topic, PARTITIONS)
    create_topic(a, plain_topic, PARTITIONS)
    config = load_config(
        write_config(
            tmp_path,
            kafka_clusters,
            topics=f"{topic}|{plain_topic}",
            **{
                "exactly.once.source.support": "enabled",
                "ferry.bins": 1,  # the held partitions and the plain ones in one task
                "A.schema.registry.url": registries["A"].url,
                "B.schema.registry.url": registries["B"].url,
                "A.schema.registry.timeout": 2,  # a registry down is found out quickly
                "B.schema.registry.timeout": 2,
            },
        )
    )
    versions = [
        {**AVRO_V1, "name": "Held"},
        {**AVRO_V2, "name": "Held"},
        {**AVRO_V2, "name": "Held", "fields": [*AVRO_V2["fields"], _field("extra")]},
    ]
    batches = [
        [{"id": 100 * n + i, "item": f"b{n}-{i}", "note": "n", "extra": "e"} for i in range(20)]
        for n in range(3)
    ]
    for n, fields in enumerate(versions):  # each batch as its own version writes it
        names = {f["name"] for f in fields["fields"]}  # type: ignore[index]
        batches[n] = [{k: v for k, v in o.items() if k in names} for o in batches[n]]
    ctx = SerializationContext(topic, MessageField.VALUE)
    notices: list[str] = []
    frozen, stopped = registries["B"], registries["A"]
    plain = [f"free-{i}".encode() for i in range(20)]

    def held(registry: RegistryProcess, partitions: int) -> bool:
        said = [n for n in notices if "partition held" in n and registry.url in n]
        return len({p for p in range(PARTITIONS) for n in said if f"partition {p} " in n}) == (
            partitions
        )

    def outage(registry: RegistryProcess, n: int, encoded: list[bytes], end: Any) -> None:
        """Records of version n wait while `registry` is down; plain ones are copied."""
        before = sum(len(x) for x in batches[:n])
        _produce(a, topic, encoded)
        _produce(a, plain_topic, plain[10 * (n - 1) : 10 * n])
        try:
            wait_for(lambda: _count(b, plain_remote) == 10 * n, 120, "plain records copied")
            wait_for(
                lambda: held(registry, PARTITIONS),
                120,
                f"both partitions said held on the registry ({registry.url})",
            )
            wait_for(
                lambda: held_in_status() == set(range(PARTITIONS)),
                60,
                "ferry status naming both held partitions",
            )
            assert _count(b, remote) == before, f"copied without {registry.url}"
        finally:
            end()
        wait_for(
            lambda: _count(b, remote) == before + len(encoded),
            120,
            f"{remote}: the held records copied once {registry.url} answers",
        )
        wait_for(lambda: not held_in_status(), 60, "ferry status with nothing held")

    def held_in_status() -> set[int]:
        [flow] = config.enabled_flows
        status = flow_status(config, flow, timeout=10)
        said = [e for e in status.errors if registry_said(e)]
        partitions = {p.partition for p in status.partitions if p.topic == topic and p.held}
        assert len(said) == len(partitions), (said, partitions)
        return partitions

    def registry_said(error: str) -> bool:
        return "schema registry did not answer" in error and f"topic '{topic}'" in error

    def meanwhile() -> None:
        serialize = AvroSerializer(source, json.dumps(versions[0]))
        _produce(a, topic, [serialize(o, ctx) for o in batches[0]])
        wait_for(lambda: _count(b, remote) == len(batches[0]), 120, f"{remote}: first copies")
        os.kill(frozen.pid, signal.SIGSTOP)
        serialize = AvroSerializer(source, json.dumps(versions[1]))  # a new id on A
        outage(
            frozen,
            1,
            [serialize(o, ctx) for o in batches[1]],
            lambda: os.kill(frozen.pid, signal.SIGCONT),
        )
        serialize = AvroSerializer(source, json.dumps(versions[2]))  # registered on A now
        encoded = [serialize(o, ctx) for o in batches[2]]
        stopped.stop()  # by its pid

        def start_again() -> None:
            registries["A"] = restart_registry(Path(stopped.directory).parent, "A")

        outage(stopped, 2, encoded, start_again)

    run_beside(Runner(config, spark=spark, on_notice=notices.append), meanwhile)

    for registry in (frozen, stopped):
        said = next(n for n in notices if "partition held" in n and registry.url in n)
        assert "schema registry did not answer" in said and f"topic '{topic}'" in said, said
        assert any("answers again" in n and registry.url in n for n in notices), notices
    decode = AvroDeserializer(target)
    records = _read(b, remote)
    written = [_in_order(batch) for batch in batches]
    for p in range(PARTITIONS):
        origins = [Origin.from_bytes(dict(m.headers())["ferry.origin"]).offset for m in records[p]]
        expected = [o for w in written for o in w[p]]
        assert origins == list(range(len(expected))), f"{remote} partition {p}"
        decoded = [
            decode(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in records[p]
        ]
        assert decoded == expected
    copied = _read(b, plain_remote)
    assert [m.value() for p in range(PARTITIONS) for m in copied[p]] == [
        v for p in range(PARTITIONS) for v in _in_order(plain)[p]
    ]


def _field(name: str) -> dict[str, Any]:
    return {"name": name, "type": "string", "default": ""}


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

    result = run_ferry("failover", "group", "-c", str(config), group, "--from", "A", "--to", "B")
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


def _decoded(bootstrap: str, topic: str, registry: SchemaRegistryClient) -> dict[int, list[Any]]:
    """Every record of `topic` decoded through `registry`, per partition."""
    decode = AvroDeserializer(registry)
    return {
        p: [decode(m.value(), SerializationContext(topic, MessageField.VALUE)) for m in msgs]
        for p, msgs in _read(bootstrap, topic).items()
    }


def _registered(registry: SchemaRegistryClient) -> dict[str, list[int]]:
    return {subject: registry.get_versions(subject) for subject in registry.get_subjects()}


def test_active_active_and_failback_decode_on_each_side_with_no_registration_loop(
    kafka_clusters: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """A<->B under the identity policy, each direction a `ferry run --once` in turn (as a
    failover to B and the failback to A run them): records written on each side through its
    own registry arrive on the other and decode there through that side's registry, so a
    record written on B after a failover decodes on A after the failback; a second A->B
    copies and registers nothing: neither flow registers the other's copies back."""
    a, b = kafka_clusters["A"].bootstrap, kafka_clusters["B"].bootstrap
    on_a, on_b = _client(registries["A"]), _client(registries["B"])
    topic = f"{topic_name}-aa"
    for bootstrap in (a, b):
        create_topic(bootstrap, topic, PARTITIONS)
    ctx = SerializationContext(topic, MessageField.VALUE)
    written_a = [{"id": i, "item": f"a-{i}"} for i in range(30)]
    written_b = [{"id": 500 + i, "item": f"b-{i}", "note": "on B"} for i in range(30)]
    serialize_a = AvroSerializer(on_a, json.dumps({**AVRO_V1, "name": "Both"}))
    serialize_b = AvroSerializer(on_b, json.dumps({**AVRO_V2, "name": "Both"}))
    _produce(a, topic, [serialize_a(o, ctx) for o in written_a])
    _produce(b, topic, [serialize_b(o, ctx) for o in written_b])
    ab, ba = flow_configs(
        tmp_path,
        kafka_clusters,
        ("A->B", "B->A"),
        topics=topic,
        **{
            "replication.policy.class": "IdentityReplicationPolicy",
            "exactly.once.source.support": "enabled",
            "A.schema.registry.url": registries["A"].url,
            "B.schema.registry.url": registries["B"].url,
        },
    )
    run_in_order([ab, ba], spark)
    subject = f"{topic}-value"
    after = {"A": _registered(on_a), "B": _registered(on_b)}
    # Each side: its own writer's version, and the other's copied in (identity: one subject).
    assert after["A"][subject] == [1, 2] and after["B"][subject] == [1, 2], after
    mine, theirs = _in_order(written_a), _in_order(written_b)
    expected = {
        "A": {p: mine[p] + theirs[p] for p in range(PARTITIONS)},
        "B": {p: theirs[p] + mine[p] for p in range(PARTITIONS)},
    }
    for side, bootstrap, registry in (("A", a, on_a), ("B", b, on_b)):
        assert _decoded(bootstrap, topic, registry) == expected[side], f"{topic} on {side}"
    records = _read(b, topic)
    for p in range(PARTITIONS):  # A's copies on B: B's ids, A's id in the header
        copies = records[p][len(theirs[p]) :]
        assert {dict(m.headers())["ferry.schema.id.value"] for m in copies} == {
            str(schema_id(serialize_a(written_a[0], ctx))).encode()
        }

    run_in_order([ab], spark)  # B's copies on A are not copied back, nor registered on B
    assert {"A": _registered(on_a), "B": _registered(on_b)} == after
    assert _decoded(b, topic, on_b) == expected["B"]


def test_a_chain_translates_at_every_hop_and_keeps_the_first_id(
    kafka_clusters: dict[str, LocalCluster],
    cluster_c: dict[str, LocalCluster],
    registries: dict[str, RegistryProcess],
    topic_name: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """A->B->C: each hop registers the schema in its own target's registry under the remote
    topic's subject and rewrites the id to that registry's; C's copies decode through C's
    registry and carry A's id in the header, as `ferry.origin` carries A."""
    clusters = {**kafka_clusters, **cluster_c}
    a, c = clusters["A"].bootstrap, clusters["C"].bootstrap
    on_a, on_b, on_c = (_client(registries[x]) for x in ("A", "B", "C"))
    topic = f"{topic_name}-chain"
    create_topic(a, topic, PARTITIONS)
    # B and C hold schemas of their own: no hop's ids are free to line up by chance.
    for n, registry in enumerate((on_b, on_b, on_c)):
        local = {"type": "enum", "name": f"Chain{n}", "symbols": ["X"]}
        registry.register_schema(f"{topic}-local-{n}-value", Schema(json.dumps(local), "AVRO"))
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = AvroSerializer(on_a, json.dumps({**AVRO_V1, "name": "Chained"}))
    written = [{"id": i, "item": f"chain-{i}"} for i in range(30)]
    encoded = [serialize(o, ctx) for o in written]
    _produce(a, topic, encoded)
    hops = flow_configs(
        tmp_path,
        clusters,
        ("A->B", "B->C"),
        topics=f"{topic}|A\\.{topic}",
        **{
            "exactly.once.source.support": "enabled",
            **{f"{x}.schema.registry.url": registries[x].url for x in ("A", "B", "C")},
        },
    )
    run_in_order(hops, spark)

    on_c_topic = f"B.A.{topic}"
    assert _decoded(c, on_c_topic, on_c) == _in_order(written)
    first = schema_id(encoded[0])
    b_id = on_b.get_latest_version(f"A.{topic}-value").schema_id
    c_id = on_c.get_latest_version(f"{on_c_topic}-value").schema_id
    assert len({first, b_id, c_id}) == 3, (first, b_id, c_id)  # translated at each hop
    for msgs in _read(c, on_c_topic).values():
        for m in msgs:
            assert schema_id(m.value()) == c_id
            assert dict(m.headers())["ferry.schema.id.value"] == str(first).encode()
            assert Origin.from_bytes(dict(m.headers())["ferry.origin"]).alias == "A"
