"""A read-only source: `A->B.source.read.only = true` and a principal on A that may only read
(READ, DESCRIBE and DESCRIBE_CONFIGS of topics, DESCRIBE of groups and of the cluster). The
copy, checkpoints, group offset sync, `ferry status`, `ferry doctor` and a whole-flow failover
all work, and A is left exactly as it was: the same topics, every partition's end unmoved
(`__consumer_offsets` included, so no group was committed there); `ferry switchover`, which
would fence A's writers with ACLs there, refuses."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_all, wait_for
from tests.integration.replication_setup import run_once
from tests.integration.secure_pair import SecurePair, Settings, commit, committed, properties

pytestmark = [pytest.mark.integration, pytest.mark.secure, pytest.mark.timeout(900)]

READER = "reader"
# What the reader may do on A: nothing that writes (no WRITE, CREATE, ALTER, DELETE, and no
# READ of groups, which is what committing a group's offsets takes).
READER_ACLS = (
    (ResourceType.TOPIC, "*", AclOperation.READ),
    (ResourceType.TOPIC, "*", AclOperation.DESCRIBE),
    (ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS),
    (ResourceType.GROUP, "*", AclOperation.DESCRIBE),
    (ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
)


def _add_reader(pair: SecurePair) -> Settings:
    """A SCRAM user on A with READER_ACLS only; its client settings."""
    admin = AdminClient(pair.admin("A"))
    password = secrets.token_hex(12)
    upsert = UserScramCredentialUpsertion(
        READER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    grants = [
        AclBinding(
            kind,
            name,
            ResourcePatternType.LITERAL,
            f"User:{READER}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for kind, name, operation in READER_ACLS
    ]
    for future in admin.create_acls(grants).values():
        future.result(30)
    reader = {**pair.ferry("A"), "sasl.username": READER, "sasl.password": password}

    def answers() -> bool:
        try:
            AdminClient(reader).list_topics(timeout=5)
        except Exception:
            return False
        return True

    wait_for(answers, 60, f"User:{READER} logging in to A")
    return reader


def _snapshot(pair: SecurePair) -> dict[str, Any]:
    """A's topics and every partition's end, internal topics included."""
    admin = AdminClient(pair.admin("A"))
    topics = admin.list_topics(timeout=30).topics
    partitions = [TopicPartition(t, p) for t, m in topics.items() for p in m.partitions]
    ends = admin.list_offsets({tp: OffsetSpec.latest() for tp in partitions}, request_timeout=30)
    return {
        "topics": sorted(topics),
        "ends": {f"{tp.topic}:{tp.partition}": f.result().offset for tp, f in ends.items()},
    }


def test_a_read_only_source_is_copied_synced_and_failed_over_and_left_untouched(
    sasl_ssl: SecurePair, topic_name: str, tmp_path: Path, spark: Any
) -> None:
    reader = _add_reader(sasl_ssl)
    a, a_admin = sasl_ssl.bootstrap("A"), sasl_ssl.admin_only("A")
    create_topic(a, topic_name, 2, a_admin)
    now = int(time.time() * 1000)
    sent = [Rec(i % 2, b"k%d" % i, b"v%d" % i, (), now + i) for i in range(120)]
    produce(a, topic_name, sent, a_admin)
    group = f"app-{uuid.uuid4().hex[:6]}"
    positions = {(topic_name, 0): 20, (topic_name, 1): 45}
    commit(sasl_ssl.admin("A"), group, positions)
    before = _snapshot(sasl_ssl)

    config = properties(
        tmp_path,
        {"A": reader, "B": sasl_ssl.ferry("B")},
        topic_name,
        **{
            "A->B.source.read.only": "true",
            "groups": group,
            "sync.group.offsets.enabled": "true",
            "emit.checkpoints.interval.seconds": "1",
        },
    )
    assert run_once(config, spark)["A->B"].records == 120
    remote = f"A.{topic_name}"
    copied = read_all(sasl_ssl.bootstrap("B"), remote, 2, 120, client=sasl_ssl.admin_only("B"))
    assert sorted((r.partition, r.key, r.value) for r in copied) == sorted(
        (r.partition, r.key, r.value) for r in sent
    )
    expected = {(remote, p): offset for (_, p), offset in positions.items()}
    # Checkpoints and group sync (run once after the copy): the group is at its place on B.
    assert committed(sasl_ssl.admin("B"), group, list(expected)) == expected

    status = run_ferry("status", "-c", str(config), "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    flow = json.loads(status.stdout)["flows"]["A->B"]
    assert flow["lag"] == 0 and flow["rpo_seconds"] == 0, flow
    # No heartbeats: the latency is the copies' own (ack time minus source timestamp).
    assert flow["latency_from"] == "copies" and flow["latency_ms"] is not None, flow

    doctor = run_ferry("doctor", "-c", str(config), "--json")
    found = json.loads(doctor.stdout)
    # The reader's grants are all a read-only flow needs: no ACL finding (RF 1 warnings only).
    assert not [f for f in found["errors"] + found["warnings"] if f["kind"] == "acl"], found
    assert doctor.returncode == 2 and not found["errors"], found

    switchover = run_ferry("switchover", "-c", str(config), "--flow", "A->B")
    assert switchover.returncode == 1, switchover.stdout + switchover.stderr
    assert "A is a read-only source (source.read.only = true)" in switchover.stderr

    failover = run_ferry("failover", "flow", "-c", str(config), "A->B", "--json")
    assert failover.returncode == 0, failover.stdout + failover.stderr
    assert committed(sasl_ssl.admin("B"), group, list(expected)) == expected

    assert _snapshot(sasl_ssl) == before  # nothing created or written on A
