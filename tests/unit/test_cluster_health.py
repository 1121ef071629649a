"""Why a cluster that answers metadata times out: the pure reading of its metadata."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.kafka import clients
from ferry.ops.cluster_health import (
    Explainer,
    Shortfall,
    describe_health,
    diagnose,
    shortfalls,
    topics_to_describe,
)


class P(NamedTuple):
    leader: int
    replicas: list[int]
    isrs: list[int]


OK = P(1, [1, 2, 3], [1, 2, 3])
ONE_LEFT = P(2, [1, 2, 3], [2])  # 2 of 3 brokers down: only broker 2 in sync
NO_LEADER = P(-1, [1, 3], [])


def two_of_three_down() -> dict[str, dict[int, P]]:
    return {
        "__consumer_offsets": {n: ONE_LEFT for n in range(10)},
        "A.orders": {n: ONE_LEFT for n in range(8)},
        "A.heartbeats": {0: OK},
    }


def test_partitions_below_min_insync_are_counted_exactly_and_named() -> None:
    metadata = two_of_three_down()
    min_isr = {"__consumer_offsets": 2, "A.orders": 2}
    assert len(shortfalls(metadata, min_isr)) == 18
    text = describe_health("B", [2], metadata, min_isr)
    assert text == (
        "cluster B answers (1 of 3 brokers listed: 2) but 18 partitions have fewer in-sync "
        "replicas than min.insync.replicas (e.g. __consumer_offsets-0: ISR [2] < 2, "
        "__consumer_offsets-1: ISR [2] < 2, __consumer_offsets-2: ISR [2] < 2, "
        "__consumer_offsets-3: ISR [2] < 2, __consumer_offsets-4: ISR [2] < 2) and 0 have no "
        "leader: writes and offset commits there wait (NOT_ENOUGH_REPLICAS) until their "
        "replicas are back; ferry waits and retries, nothing is lost"
    )


def test_an_isr_at_min_insync_is_not_short() -> None:
    metadata = {"t": {0: P(2, [1, 2, 3], [2, 3]), 1: ONE_LEFT}}
    assert shortfalls(metadata, {"t": 2}) == [Shortfall("t", 1, (1, 2, 3), (2,), 2)]
    assert shortfalls(metadata, {"t": 1}) == []


def test_leaderless_partitions_are_short_whatever_their_setting() -> None:
    metadata = {"A.orders": {0: OK, 1: NO_LEADER, 2: NO_LEADER}}
    found = shortfalls(metadata, {})
    assert [(s.partition, s.leaderless) for s in found] == [(1, True), (2, True)]
    assert describe_health("B", [1, 2, 3], metadata, {}) == (
        "cluster B answers (3 of 3 brokers listed: 1, 2, 3) but 0 partitions have fewer "
        "in-sync replicas than min.insync.replicas and 2 have no leader (e.g. A.orders-1: "
        "replicas [1, 3], ISR [], A.orders-2: replicas [1, 3], ISR []): writes and offset "
        "commits there wait (LEADER_NOT_AVAILABLE) until their replicas are back; ferry waits "
        "and retries, nothing is lost"
    )


def test_both_kinds_singular_and_the_cluster_size_from_replica_lists() -> None:
    metadata = {"t": {0: ONE_LEFT, 1: P(-1, [4, 5], [])}}
    text = describe_health("B", [2], metadata, {"t": 2})
    assert text is not None
    assert text.startswith("cluster B answers (1 of 5 brokers listed: 2) but 1 partition has ")
    assert "and 1 has no leader (e.g. t-1: replicas [4, 5], ISR [])" in text
    assert "(NOT_ENOUGH_REPLICAS, LEADER_NOT_AVAILABLE)" in text


def test_examples_are_capped_the_count_is_not() -> None:
    metadata = {"t": {n: ONE_LEFT for n in range(40)}}
    text = describe_health("B", [2], metadata, {"t": 3}, examples=3)
    assert text is not None
    assert "40 partitions have" in text
    assert text.count(": ISR [2] < 3") == 3


def test_internal_topics_come_first_among_the_examples() -> None:
    metadata = {"A.aaa": {0: ONE_LEFT}, "__transaction_state": {7: ONE_LEFT}}
    found = shortfalls(metadata, {"A.aaa": 2, "__transaction_state": 2})
    assert [(s.topic, s.partition) for s in found] == [("__transaction_state", 7), ("A.aaa", 0)]


def test_nothing_short_gives_nothing() -> None:
    healthy = {"t": {0: OK, 1: OK}, "u": {0: P(1, [1], [1])}}
    assert shortfalls(healthy, {"t": 2, "u": 1}) == []
    assert describe_health("B", [1, 2, 3], healthy, {"t": 2, "u": 1}) is None
    # under-replicated but at min.insync.replicas: writes go on
    assert describe_health("B", [1, 2], {"t": {0: P(1, [1, 2, 3], [1, 2])}}, {"t": 2}) is None
    assert describe_health("B", [], {}, {}) is None


def test_a_topic_whose_setting_was_not_read_is_not_judged_on_its_isr() -> None:
    assert shortfalls({"t": {0: ONE_LEFT}}, {}) == []


def test_user_topic_names_are_printed_verbatim() -> None:
    name = "orders-[a-z]+ [/x](é"
    text = describe_health("B", [2], {name: {0: ONE_LEFT}}, {name: 2})
    assert text is not None
    assert f"(e.g. {name}-0: ISR [2] < 2)" in text


def test_only_topics_with_a_led_partition_missing_a_replica_are_described() -> None:
    metadata = {
        "full": {0: OK},
        "short": {0: OK, 1: ONE_LEFT},
        "leaderless": {0: NO_LEADER},
        "__consumer_offsets": {0: ONE_LEFT},
    }
    assert topics_to_describe(metadata) == ["__consumer_offsets", "short"]


def cluster(alias: str) -> ClusterConfig:
    return ClusterConfig(alias=alias, bootstrap_servers=f"127.0.0.1:{ord(alias)}")


def test_the_explainer_adds_a_diagnosis_once_per_unavailable_cluster() -> None:
    asked: list[tuple[str, float]] = []

    def diagnose(c: ClusterConfig, timeout: float) -> str | None:
        asked.append((c.alias, timeout))
        return f"cluster {c.alias} answers but ..." if c.alias == "B" else None

    explain = Explainer([cluster("A"), cluster("B")], 3.0, diagnose).lines
    down = KafkaUnavailableError("B", "127.0.0.1:66", "Failed to get committed offsets")
    assert explain(down) == [str(down), "cluster B answers but ..."]
    assert explain(down) == [str(down)]  # said once, not once per error
    a_down = KafkaUnavailableError("A", "127.0.0.1:65", "Timed out")
    assert explain(a_down) == [str(a_down)]  # A answers no metadata: nothing to add
    assert explain(FerryError("refused")) == ["refused"]
    unknown = KafkaUnavailableError("C", "127.0.0.1:67", "Timed out")
    assert explain(unknown) == [str(unknown)]
    assert asked == [("B", 3.0), ("A", 3.0)]


class FakeAdmin:
    """Answers metadata like a cluster with one live broker, and topic settings."""

    def __init__(self, metadata: dict[str, dict[int, P]] | None, min_isr: dict[str, str]):
        self.metadata = metadata
        self.min_isr = min_isr
        self.described: list[str] = []

    def list_topics(self, timeout: float = -1) -> Any:
        if self.metadata is None:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        topics = {t: SimpleNamespace(partitions=ps) for t, ps in self.metadata.items()}
        broker = SimpleNamespace(host="127.0.0.1", port=9092)
        return SimpleNamespace(
            brokers={2: broker}, topics=topics, orig_broker_name="127.0.0.1:9092/2"
        )

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Any]:
        futures = {}
        for resource in resources:
            self.described.append(resource.name)
            future: Future[dict[str, Any]] = Future()
            if resource.name in self.min_isr:
                entry = SimpleNamespace(value=self.min_isr[resource.name])
                future.set_result({"min.insync.replicas": entry})
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
            futures[resource] = future
        return futures


def test_diagnose_reads_the_settings_of_short_topics_only(monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = {**two_of_three_down(), "A.lost": {0: ONE_LEFT}}
    admin = FakeAdmin(metadata, {"__consumer_offsets": "2", "A.orders": "2"})
    monkeypatch.setattr(clients, "admin_client", lambda _settings: admin)
    text = diagnose(cluster("B"), 1.0)
    assert text is not None
    assert text.startswith("cluster B answers (1 of 3 brokers listed: 2) but 18 partitions")
    assert admin.described == ["A.lost", "A.orders", "__consumer_offsets"]  # A.lost: not read


def test_diagnose_says_nothing_of_a_cluster_that_answers_no_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = FakeAdmin(None, {})
    monkeypatch.setattr(clients, "admin_client", lambda _settings: admin)
    assert diagnose(cluster("B"), 0.1) is None
    healthy = FakeAdmin({"t": {0: OK}}, {})
    monkeypatch.setattr(clients, "admin_client", lambda _settings: healthy)
    assert diagnose(cluster("B"), 0.1) is None
    assert healthy.described == []


def test_brokers_listed_but_silent_are_named_when_no_partition_looks_short() -> None:
    # The quorum lost with 2 of 3 combined nodes: nothing can shrink an ISR, so the metadata
    # still shows every partition whole; only the brokers' silence tells.
    whole = {"A.orders": {0: OK}}
    text = describe_health("B", [1, 2, 3], whole, {}, silent=[3, 2])
    assert text is not None
    assert text.startswith("cluster B answers, but 2 brokers of the 3 it lists (2, 3) do not")
    assert "min.insync.replicas" in text and "NOT_ENOUGH_REPLICAS" in text
    assert describe_health("B", [1, 2, 3], whole, {}, silent=[]) is None


def test_diagnose_asks_each_listed_broker_at_its_own_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Whole(FakeAdmin):
        def __init__(self, address: str) -> None:
            super().__init__({"t": {0: OK}}, {})
            self.address = address

        def list_topics(self, timeout: float = -1) -> Any:
            if self.address in ("127.0.0.1:9002", "127.0.0.1:9003"):
                raise KafkaException(KafkaError(KafkaError._TRANSPORT))
            brokers = {n: SimpleNamespace(host="127.0.0.1", port=9000 + n) for n in (1, 2, 3)}
            topics = {t: SimpleNamespace(partitions=ps) for t, ps in (self.metadata or {}).items()}
            return SimpleNamespace(
                brokers=brokers, topics=topics, orig_broker_name=f"{self.address}/1"
            )

    monkeypatch.setattr(
        clients,
        "admin_client",
        lambda settings: Whole(settings.get("bootstrap.servers", "127.0.0.1:9001")),
    )
    text = diagnose(cluster("B"), 1.0)
    assert text is not None and "of the 3 it lists (2, 3) do not" in text


def test_a_broker_answering_under_any_security_protocol_is_found_at_its_address() -> None:
    from ferry.ops.cluster_health import broker_address

    assert broker_address("127.0.0.1:9092/1") == "127.0.0.1:9092"
    assert broker_address("sasl_ssl://127.0.0.1:9093/2") == "127.0.0.1:9093"
    assert broker_address("ssl://broker-1.dc-a:9094/bootstrap") == "broker-1.dc-a:9094"
