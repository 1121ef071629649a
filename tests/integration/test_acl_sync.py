"""ACL sync between two SASL clusters with an authorizer: READ and ALL on a source
topic become READ on its remote topic; WRITE never appears there. Also the first end-to-end
run of ferry against secured clusters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ferry.local.cluster import LocalCluster
from tests.integration.extra_clusters import SASL_ADMIN_CLIENT as ADMIN_CLIENT
from tests.integration.kafka_helpers import Rec, produce, record_count, wait_for
from tests.integration.replication_setup import run_once, write_config

pytestmark = pytest.mark.integration

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret";'
)


def _acl(topic: str, principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        principal,
        "*",
        operation,
        AclPermissionType.ALLOW,
    )


def _acls_on(admin: AdminClient, topic: str) -> set[tuple[str, str, str]]:
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    return {
        (b.principal, b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(wanted).result(30)
    }


def test_read_and_all_become_read_and_write_is_not_synced(
    secured_pair: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    s, t = secured_pair["S"].bootstrap, secured_pair["T"].bootstrap
    source_admin = AdminClient({**ADMIN_CLIENT, "bootstrap.servers": s})
    target_admin = AdminClient({**ADMIN_CLIENT, "bootstrap.servers": t})
    source_admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    acls = [
        _acl(topic_name, "User:alice", AclOperation.READ),
        _acl(topic_name, "User:bob", AclOperation.ALL),
        _acl(topic_name, "User:carol", AclOperation.WRITE),
    ]
    for future in source_admin.create_acls(acls).values():
        future.result(30)
    wait_for(lambda: len(_acls_on(source_admin, topic_name)) == 3, 30, "ACLs visible on S")
    produce(s, topic_name, [Rec(0, b"k", b"v", (), 0)] * 20, ADMIN_CLIENT)

    config = write_config(
        tmp_path,
        secured_pair,
        flows=("S->T",),
        topics=topic_name,
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": JAAS,
        },
    )
    run_once(config, spark)

    remote = f"S.{topic_name}"
    wait_for(lambda: len(_acls_on(target_admin, remote)) == 2, 30, f"ACLs on {remote}")
    assert _acls_on(target_admin, remote) == {
        ("User:alice", "READ", "ALLOW"),
        ("User:bob", "READ", "ALLOW"),
    }
    assert record_count(t, remote, ADMIN_CLIENT) == 20
