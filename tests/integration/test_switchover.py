"""A planned switchover, S->T and back, while a producer of its own principal keeps writing.

On the session's SASL pair with an ACL authorizer (S and T): ferry authenticates as `ferry`,
the producer as `alice`, who may write the topic on S by an ACL of her own. A `ferry run` in
this process copies S->T (identity policy, so the producers' topic has one name on both
sides) while alice writes ids. `ferry switchover --flow S->T`, cut after its second step (the
hook a runbook rehearses a resume with), then run again: alice's writes on S are refused from
the fence on, T holds every record she had acknowledged exactly once (by id), the group
committed on S stands on T, the running `ferry run` stops S->T and starts T->S without a
restart, and alice's writes on T reach S. `ferry switchover --flow T->S` switches back: she
writes S again and it reaches T.

Without an authorizer (the session's plain A and B) the switchover is refused with the
sentence, and with `--writers-stopped` it goes through.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
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

from ferry.config import load_config
from ferry.control.log import ControlLog, recorded_control
from ferry.control.switchover import STOP_AFTER_ENV, SwitchoverOptions, switchover
from ferry.errors import FerryError
from ferry.flows.override import FlowControl
from ferry.flows.switchover import SwitchoverRecord
from ferry.kafka.provenance import ORIGIN_HEADER, Origin
from ferry.local.cluster import LocalCluster
from ferry.service.run import FerryRun, RunOptions
from tests.ferry_cli import run_ferry
from tests.integration.extra_clusters import FERRY_PASSWORD, SASL_ADMIN_CLIENT
from tests.integration.group_helpers import commit_group, committed_offsets
from tests.integration.kafka_helpers import Rec, create_topic, produce, wait_for
from tests.integration.replication_setup import run_once, write_config

pytestmark = [pytest.mark.integration, pytest.mark.dr, pytest.mark.timeout(900)]

PARTITIONS = 2
FERRY_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="ferry" password="{FERRY_PASSWORD}";'
)
ALICE = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}


class Writer:
    """Alice writing ids to one cluster's topic until stopped: which were acknowledged, how
    many were refused (and the first refusal)."""

    def __init__(self, bootstrap: str, topic: str, tag: str) -> None:
        self.topic = topic
        self.tag = tag
        self.acked: list[str] = []
        self.refused = 0
        self.refusal = ""
        self._stop = threading.Event()
        self._producer = Producer(
            {
                **ALICE,
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 5000,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append(msg.value().decode())
        else:
            self.refused += 1
            self.refusal = self.refusal or str(err)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"{self.tag}-{n}".encode()
            try:
                self._producer.produce(
                    self.topic, value=value, partition=n % PARTITIONS, on_delivery=self._delivered
                )
            except KafkaException as exc:  # refused before it was sent (metadata)
                self.refused += 1
                self.refusal = self.refusal or str(exc)
            self._producer.poll(0.02)
            n += 1
        self._producer.flush(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({**SASL_ADMIN_CLIENT, "bootstrap.servers": bootstrap})


def _write_acls(bootstrap: str, topic: str) -> set[tuple[str, str]]:
    """(principal, permission) of the literal WRITE ACLs on `topic`."""
    wanted = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.WRITE,
        AclPermissionType.ANY,
    )
    admin = _admin(bootstrap)  # kept until the answer: a dropped client ends its requests
    found = admin.describe_acls(wanted, request_timeout=30).result(60)
    return {(b.principal, b.permission_type.name) for b in found}


def _records(bootstrap: str, topic: str) -> list[tuple[str, str | None]]:
    """Every record of `topic` (read_committed): (value, the alias its origin header names,
    None without one)."""
    consumer = Consumer(
        {
            **SASL_ADMIN_CLIENT,
            "bootstrap.servers": bootstrap,
            "group.id": f"test-read-{uuid.uuid4().hex[:6]}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: list[tuple[str, str | None]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, f"{topic}: read to the end of {at_end} only"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                at_end.add(int(msg.partition() or 0))
                continue
            origin = dict(msg.headers() or ()).get(ORIGIN_HEADER)
            alias = Origin.from_bytes(origin).alias if isinstance(origin, bytes) else None
            out.append((bytes(msg.value() or b"").decode(), alias))
    finally:
        consumer.close()
    return out


def _values(bootstrap: str, topic: str, origin: str | None) -> Counter[str]:
    return Counter(v for v, alias in _records(bootstrap, topic) if alias == origin)


def _commit_group(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    commit_group(bootstrap, group, offsets, SASL_ADMIN_CLIENT)


def _run_beside(run: FerryRun, actions: Any) -> None:
    """`ferry run` in this thread (Spark's Python data sources resolve only in the thread
    that registered them), `actions` in another; the run stops when they end."""
    failures: list[BaseException] = []

    def meanwhile() -> None:
        try:
            actions()
        except BaseException as exc:
            failures.append(exc)
        finally:
            run.request_stop()

    beside = threading.Thread(target=meanwhile, daemon=True)
    beside.start()
    run.run()
    beside.join(60)
    if failures:
        raise failures[0]


def test_a_switchover_fences_the_writer_loses_nothing_reverses_the_flow_and_switches_back(
    secured_pair: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    s, t = secured_pair["S"].bootstrap, secured_pair["T"].bootstrap
    topic, group = topic_name, f"{topic_name}-app"
    admin_s = _admin(s)
    admin_s.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    alice_writes = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin_s.create_acls([alice_writes]).values():
        future.result(30)
    wait_for(lambda: bool(_write_acls(s, topic)), 30, "alice's ACL listed on S")
    produce(
        s,
        topic,
        [Rec(i % PARTITIONS, None, f"first-{i}".encode(), (), 0) for i in range(40)],
        ALICE,
    )
    _commit_group(s, group, {(topic, 0): 10, (topic, 1): 10})
    control_topic = f"ferry-control-{topic}.internal"
    path = write_config(
        tmp_path,
        secured_pair,
        flows=("S->T",),
        topics=topic,
        groups=f"{topic}-.*",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": FERRY_JAAS,
            "replication.policy.class": "identity",
            "api.control.topic": control_topic,
            "ferry.commit.interval.ms": 200,
        },
    )
    config = load_config(path)
    notices: list[str] = []
    lines: list[str] = []
    run = FerryRun(config, RunOptions(), on_notice=notices.append, spark=spark)
    options = SwitchoverOptions(deadline=120)

    def actions() -> None:
        print("stage: waiting for S->T to copy")
        wait_for(lambda: sum(_values(t, topic, "S").values()) >= 40, 120, "S->T copying")
        writer = Writer(s, topic, "live").start()
        wait_for(lambda: len(writer.acked) >= 50, 60, "alice writing S")

        print("stage: switchover cut after the drain")  # Cut after the drain, then resumed.
        os.environ[STOP_AFTER_ENV] = "drain"
        try:
            with pytest.raises(FerryError, match="stopped after step drain"):
                switchover(config, "S->T", options, say=lines.append)
        finally:
            del os.environ[STOP_AFTER_ENV]
        wait_for(lambda: writer.refused > 0, 30, "alice's writes on S refused")
        assert "TOPIC_AUTHORIZATION_FAILED" in writer.refusal or "uthoriz" in writer.refusal
        log = ControlLog(config.clusters["T"], control_topic)
        raw = log.read_switchover("S->T")
        assert raw is not None
        cut = SwitchoverRecord.from_bytes(raw)
        assert (cut.state, cut.done) == ("running", ("fence", "drain"))
        assert [(f.topic, f.principal) for f in cut.fence] == [(topic, "User:alice")]
        assert ("User:alice", "DENY") in _write_acls(s, topic)

        print("stage: resumed", lines)
        report = switchover(config, "S->T", options, say=lines.append)
        assert (report.action, report.resumed_at) == ("done", "groups")
        assert report.record is not None and report.record.done == (
            "fence",
            "drain",
            "groups",
            "reverse",
        )
        [proved] = report.proof
        assert proved.missing == 0 and proved.duplicates == 0
        assert proved.records == proved.copies
        writer.stop()
        on_t = _values(t, topic, "S")
        acked = ["first-" + str(i) for i in range(40)] + writer.acked
        assert {v: on_t[v] for v in acked} == dict.fromkeys(acked, 1)  # each exactly once
        assert committed_offsets(t, group, SASL_ADMIN_CLIENT) == {(topic, 0): 10, (topic, 1): 10}
        assert ("User:alice", "ALLOW") in _write_acls(t, topic)
        assert recorded_control(config, "S", "T") == FlowControl().enable(False)
        assert recorded_control(config, "T", "S") == FlowControl().enable(True)

        print("stage: reversed", lines, notices)
        # The running ferry run reverses without a restart; alice writes T, it reaches S.
        wait_for(lambda: any("running flows T->S" in n for n in notices), 60, "T->S running")
        produce(
            t,
            topic,
            [Rec(i % PARTITIONS, None, f"on-t-{i}".encode(), (), 0) for i in range(20)],
            ALICE,
        )
        wait_for(
            lambda: sum(v.startswith("on-t-") for v in _values(s, topic, "T")) == 20,
            120,
            "alice's writes on T copied to S",
        )

        print("stage: switching back")
        # Switching back: alice fenced on T, the fence on S taken back, S->T runs again.
        produce(
            t,
            topic,
            [Rec(i % PARTITIONS, None, f"late-t-{i}".encode(), (), 0) for i in range(10)],
            ALICE,
        )
        back = switchover(config, "T->S", options, say=lines.append)
        print("stage: switched back", lines, notices)
        assert back.action == "done"
        assert all(p.missing == 0 for p in back.proof)
        assert sum(v.startswith("late-t-") for v in _values(s, topic, "T")) == 10
        assert ("User:alice", "DENY") not in _write_acls(s, topic)
        assert ("User:alice", "DENY") in _write_acls(t, topic)
        assert recorded_control(config, "S", "T") == FlowControl()  # as the file says
        assert recorded_control(config, "T", "S") == FlowControl()
        wait_for(
            lambda: sum("running flows S->T" in n for n in notices) >= 1, 60, "S->T running again"
        )
        produce(
            s,
            topic,
            [Rec(i % PARTITIONS, None, f"again-{i}".encode(), (), 0) for i in range(10)],
            ALICE,
        )
        wait_for(
            lambda: sum(v.startswith("again-") for v in _values(t, topic, "S")) == 10,
            120,
            "alice's writes on S copied to T again",
        )

    _run_beside(run, actions)
    assert any(line.startswith("fenced: DENY WRITE for User:alice") for line in lines)
    assert any(line.startswith("resuming the switchover of S->T at step groups") for line in lines)


def test_without_an_authorizer_it_is_refused_unless_the_writers_are_stopped(
    kafka_clusters: dict[str, LocalCluster], topic_name: str, tmp_path: Path, spark: Any
) -> None:
    a = kafka_clusters["A"].bootstrap
    create_topic(a, topic_name, PARTITIONS)
    produce(a, topic_name, [Rec(i % PARTITIONS, None, b"v", (), 0) for i in range(30)])
    control_topic = f"ferry-control-{topic_name}.internal"
    path = write_config(
        tmp_path,
        kafka_clusters,
        topics=topic_name,
        groups=f"{topic_name}-.*",  # the session's clusters hold other tests' groups
        **{"api.control.topic": control_topic},
    )
    run_once(path, spark)
    config = load_config(path)

    refused = run_ferry("switchover", "-c", str(path), "--flow", "A->B")
    assert refused.returncode == 1
    assert (
        "not switched over: cluster A has no ACL authorizer, so ferry cannot fence the "
        "writers of A->B's topics there; stop them yourself and run again with "
        "--writers-stopped"
    ) in refused.stderr
    assert recorded_control(config, "A", "B") == FlowControl()  # nothing changed

    planned = run_ferry(
        "switchover", "-c", str(path), "--flow", "A->B", "--writers-stopped", "--dry-run", "--json"
    )
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["planned"] == ["fence", "drain", "groups", "reverse"]

    done = run_ferry("switchover", "-c", str(path), "--flow", "A->B", "--writers-stopped", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["action"], report["state"], report["writers_stopped"]) == ("done", "done", True)
    assert [s["step"] for s in report["steps"]] == ["fence", "drain", "groups", "reverse"]
    assert report["fence"] == []
    assert report["proof"] == [
        {
            "topic": topic_name,
            "records": 0,
            "copies": 0,
            "missing": 0,
            "duplicates": 0,
            "partitions": [
                {
                    "partition": p,
                    "start": 15,
                    "end": 15,
                    "records": 0,
                    "copies": 0,
                    "missing": 0,
                    "duplicates": 0,
                }
                for p in range(PARTITIONS)
            ],
        }
    ]
    assert recorded_control(config, "A", "B") == FlowControl().enable(False)
    assert recorded_control(config, "B", "A") == FlowControl().enable(True)

    again = run_ferry("switchover", "-c", str(path), "--flow", "A->B", "--writers-stopped")
    assert again.returncode == 0, again.stderr
    assert "A->B was switched over already" in again.stdout

    back = run_ferry("switchover", "-c", str(path), "--flow", "B->A", "--writers-stopped")
    assert back.returncode == 0, back.stderr
    assert "switched over: B->A is stopped, its reverse runs" in back.stdout
    assert recorded_control(config, "A", "B") == FlowControl()
    assert recorded_control(config, "B", "A") == FlowControl()
