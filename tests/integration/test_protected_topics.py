"""Protected remote topics on the SASL pair (an ACL authorizer on each cluster): a principal
allowed to write `A.<topic>` on B is refused there while A->B copies into it, because ferry
denies it; `ferry failover flow A->B` lifts that (recorded, so a ferry run afterwards does
not protect the topic again), and the same producer's write is accepted; a switchover to
B->A and back protects it again."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from ferry.config.loader import load_config
from ferry.control.log import recorded_control
from ferry.flows.override import FlowControl
from ferry.service.run import FerryRun, RunOptions
from tests.ferry_cli import run_ferry
from tests.integration.kafka_helpers import Rec, create_topic, produce, read_all, wait_for
from tests.integration.secure_pair import SecurePair, Settings, properties

pytestmark = [pytest.mark.integration, pytest.mark.secure, pytest.mark.timeout(600)]


def _add_writer(pair: SecurePair, topic: str) -> Settings:
    """A SCRAM user on B allowed to WRITE and DESCRIBE `topic` (literal); its settings."""
    name = f"writer-{secrets.token_hex(3)}"
    admin = AdminClient(pair.admin("B"))
    password = secrets.token_hex(12)
    upsert = UserScramCredentialUpsertion(
        name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    grants = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            f"User:{name}",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    for future in admin.create_acls(grants).values():
        future.result(30)
    writer = {**pair.ferry("B"), "sasl.username": name, "sasl.password": password}

    def logs_in() -> bool:
        try:
            AdminClient(writer).list_topics(timeout=5)
        except Exception:
            return False
        return True

    wait_for(logs_in, 60, f"User:{name} logging in to B")
    return writer


def _write(settings: Settings, topic: str) -> KafkaError | None:
    """One record produced to `topic` as `settings`' principal: its delivery error, if any."""
    producer = Producer({**settings, "acks": "all", "message.timeout.ms": 20000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"stray", on_delivery=lambda e, _m: errors.append(e))
    producer.flush(30)
    assert len(errors) == 1, f"no delivery report for the write to {topic}"
    return errors[0]


def _run_once(config: Path, spark: Any) -> list[str]:
    """`ferry run --once` in process (the control records restored first, as the command
    does); its notices."""
    notices: list[str] = []
    options = RunOptions(once=True)
    FerryRun(load_config(config), options, on_notice=notices.append, spark=spark).run()
    return notices


def test_a_remote_topic_is_written_by_ferry_alone_until_failover(
    sasl_ssl: SecurePair, topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a_admin = sasl_ssl.admin_only("A")
    create_topic(sasl_ssl.bootstrap("A"), topic_name, 1, a_admin)
    now = int(time.time() * 1000)
    produce(sasl_ssl.bootstrap("A"), topic_name, [Rec(0, b"k", b"v", (), now)], a_admin)
    remote = f"A.{topic_name}"
    writer = _add_writer(sasl_ssl, remote)
    config = properties(
        tmp_path,
        {"A": sasl_ssl.ferry("A"), "B": sasl_ssl.ferry("B")},
        topic_name,
        **{
            "api.control.topic": f"ferry-control-{topic_name}.internal",
            # Heartbeats would land in A's `heartbeats`, which every flow on this shared pair
            # copies (they always travel): a record other tests would count as theirs.
            "emit.heartbeats.enabled": "false",
            "groups": f"{topic_name}-g.*",  # none of the shared pair's other groups
        },
    )

    _run_once(config, spark)  # copies, then every control-plane task once: protection too
    refused = _write(writer, remote)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    failover = run_ferry("failover", "flow", "A->B", "-c", str(config))
    assert failover.returncode == 0, failover.stdout + failover.stderr
    assert (
        f"protection lifted: DENY WRITE for User:{writer['sasl.username']} on {remote} (B) "
        "taken back"
    ) in failover.stdout

    assert _write(writer, remote) is None
    # Recorded: a ferry run of the flow after the failover leaves the topic writable.
    _run_once(config, spark)
    assert _write(writer, remote) is None
    copies = read_all(sasl_ssl.bootstrap("B"), remote, 1, 3, client=sasl_ssl.admin_only("B"))
    assert sorted(r.value or b"" for r in copies) == [b"stray", b"stray", b"v"]

    # Failback: a switchover to B->A and one back to A->B clear the lift, and A->B's remote
    # topic is ferry's alone again.
    for flow in ("A->B", "B->A"):
        switched = run_ferry(
            "switchover", "-c", str(config), "--flow", flow, "--writers-stopped", "--json"
        )
        assert switched.returncode == 0, switched.stdout + switched.stderr
    assert recorded_control(load_config(config), "A", "B") == FlowControl()
    _run_once(config, spark)
    refused = _write(writer, remote)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
