"""Admin requests in batches within the brokers' limits (kafka/admin_batches.py), and remote
topic creation over them: 1,000 topics x 10 partitions never go to a controller in one request,
and a refusal by policy never tells the operator to create the topic by hand."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from ferry.config.model import ClusterConfig, FlowConfig
from ferry.engine.plan.remote_topics import TopicManager
from ferry.errors import KafkaUnavailableError, ReplicationError
from ferry.kafka.admin_batches import (
    MAX_PARTITIONS_PER_CREATE,
    MAX_RECORDS_PER_CONTROLLER_REQUEST,
    batches,
    create_weight,
    submit,
)


@given(st.lists(st.integers(0, 40)), st.integers(1, 50))
def test_batches_keep_order_and_stay_within_the_limit(weights: list[int], limit: int) -> None:
    items = list(enumerate(weights))
    out = list(batches(items, limit, lambda item: item[1]))
    assert [item for batch in out for item in batch] == items
    assert all(batch for batch in out)
    for batch in out:
        # Over the limit only as an item alone in its batch.
        assert sum(w for _, w in batch) <= limit or len(batch) == 1
    for before, after in itertools.pairwise(out):
        # Each batch is full: the next item would not have fitted.
        assert sum(w for _, w in before) + after[0][1] > limit


def test_batches_by_count_and_nothing_for_nothing() -> None:
    assert list(batches(range(5), 2)) == [[0, 1], [2, 3], [4]]
    assert list(batches([], 3)) == []
    with pytest.raises(ValueError, match="at least 1"):
        list(batches([1], 0))


def test_submit_sends_every_batch_and_merges_the_futures() -> None:
    sent: list[list[int]] = []

    def send(batch: list[int]) -> dict[int, str]:
        sent.append(batch)
        return {i: f"future {i}" for i in batch}

    assert submit(send, range(7), 3) == {i: f"future {i}" for i in range(7)}
    assert sent == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_topic_of_ten_partitions_writes_eleven_records_plus_its_settings() -> None:
    assert create_weight(10, []) == 11
    assert create_weight(10, ["retention.ms", "cleanup.policy"]) == 13


def test_min_insync_replicas_costs_the_controller_a_second_record() -> None:
    # Measured on a Kafka 4.1 controller: 714 topics of 10 partitions with these 3 settings
    # were refused in one request (POLICY_VIOLATION), 666 accepted.
    settings = ["retention.ms", "min.insync.replicas", "cleanup.policy"]
    assert create_weight(10, settings) == 15
    per_request = MAX_RECORDS_PER_CONTROLLER_REQUEST // create_weight(10, settings)
    assert 666 <= per_request < 714


# --- remote topics of a thousand source topics, admin clients faked --------------------------


class _Done:
    def __init__(self, value: object = None, error: KafkaError | None = None) -> None:
        self._value, self._error = value, error

    def result(self, timeout: float | None = None) -> object:
        if self._error is not None:
            raise KafkaException(self._error)
        return self._value


class _Admin:
    """A cluster's topics (name: partitions); records each request's size; refuses a
    CreateTopics over the controller's partition limit as Kafka does, whole."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.creates: list[int] = []  # partitions per CreateTopics request
        self.describes: list[int] = []  # resources per DescribeConfigs request
        self.lists: list[int] = []  # partitions per ListOffsets request

    def list_topics(self, timeout: float | None = None) -> Any:
        return SimpleNamespace(
            cluster_id="c",
            topics={
                name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(n)))
                for name, n in self.topics.items()
            },
        )

    def describe_configs(self, resources: list[Any]) -> dict[Any, _Done]:
        self.describes.append(len(resources))
        return {r: _Done({}) for r in resources}

    def create_topics(self, new: list[Any]) -> dict[str, _Done]:
        total = sum(t.num_partitions for t in new)
        self.creates.append(total)
        if total > MAX_PARTITIONS_PER_CREATE:
            refused = KafkaError(
                KafkaError.POLICY_VIOLATION, "Excessively large number of partitions per request."
            )
            return {t.topic: _Done(error=refused) for t in new}
        self.topics.update({t.topic: t.num_partitions for t in new})
        return {t.topic: _Done() for t in new}

    def list_offsets(self, request: dict[Any, Any], **_kwargs: Any) -> dict[Any, _Done]:
        self.lists.append(len(request))
        return {tp: _Done(SimpleNamespace(offset=3)) for tp in request}


def _manager(source: _Admin, target: _Admin) -> TopicManager:
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(".*",))
    return TopicManager(
        flow, clusters["A"], clusters["B"], source_admin=source, target_admin=target
    )


def test_ten_thousand_partitions_are_created_in_requests_the_controller_accepts() -> None:
    source = _Admin({f"s{i:04d}": 10 for i in range(1000)})
    target = _Admin({})
    ready = _manager(source, target).sync()
    assert len(ready) == 1000
    assert target.topics == {f"A.s{i:04d}": 10 for i in range(1000)}
    assert len(target.creates) >= 2
    # Partitions and records (one per topic and per partition) under the controller's limits.
    assert all(n + n // 10 <= MAX_RECORDS_PER_CONTROLLER_REQUEST for n in target.creates)
    assert max(source.describes) <= 1000 and max(target.describes) <= 1000


def test_end_offsets_of_ten_thousand_partitions_in_several_requests() -> None:
    source = _Admin({f"s{i:04d}": 10 for i in range(1000)})
    ends = _manager(source, _Admin({})).end_offsets(dict(source.topics))
    assert len(ends) == 10_000 and set(ends.values()) == {3}
    assert sum(source.lists) == 10_000 and len(source.lists) >= 2


def test_a_topic_over_the_partition_limit_is_named_and_never_to_be_created_by_hand() -> None:
    source = _Admin({"small": 3, "huge": MAX_PARTITIONS_PER_CREATE + 1})
    target = _Admin({})
    with pytest.raises(ReplicationError) as caught:
        _manager(source, target).sync()
    message = str(caught.value)
    assert "A.huge" in message and "B" in message
    assert "by hand" not in message and "yourself" not in message
    assert f"at most {MAX_PARTITIONS_PER_CREATE} partitions per request" in message
    # The small topic went in a request of its own and was created.
    assert "A.small" in target.topics


class _ConfigAdmin(_Admin):
    """Every topic with `retention.ms` set on it (the source) or nothing (the target);
    records each IncrementalAlterConfigs request's settings."""

    def __init__(self, topics: dict[str, int], retention: str | None) -> None:
        super().__init__(topics)
        self.retention = retention
        self.alters: list[int] = []

    def describe_configs(self, resources: list[Any]) -> dict[Any, _Done]:
        from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]

        self.describes.append(len(resources))
        entry = SimpleNamespace(
            value=self.retention,
            source=ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
            is_sensitive=False,
        )
        entries = {"retention.ms": entry} if self.retention else {}
        return {r: _Done(entries) for r in resources}

    def incremental_alter_configs(self, resources: list[Any]) -> dict[Any, _Done]:
        self.alters.append(sum(len(r.incremental_configs) for r in resources))
        return {r: _Done() for r in resources}


def test_config_sync_of_2500_topics_describes_and_alters_in_batches() -> None:
    from ferry.config.model import FerryConfig
    from ferry.kafka.admin_batches import MAX_CONFIG_RESOURCES_PER_REQUEST
    from ferry.sync.topic_configs import TopicConfigSync

    names = [f"s{i:04d}" for i in range(2500)]
    source = _ConfigAdmin(dict.fromkeys(names, 10), "5")
    target = _ConfigAdmin({f"A.{n}": 10 for n in names}, None)
    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(".*",))
    config = FerryConfig(clusters=clusters, flows=(flow,))
    TopicConfigSync(config, flow, source_admin=source, target_admin=target).sync()
    assert sum(target.alters) == 2500
    assert max(target.alters) <= MAX_CONFIG_RESOURCES_PER_REQUEST
    assert sum(source.describes) == 2500
    assert max(source.describes + target.describes) <= MAX_CONFIG_RESOURCES_PER_REQUEST


class _SlowBroker(_Admin):
    """A target whose broker answers UNKNOWN_TOPIC_OR_PART when asked to describe a topic
    its controller accepted, for the first `unknown_for` describes (all of them: None)."""

    def __init__(self, unknown_for: int | None, topics: dict[str, int] | None = None) -> None:
        super().__init__(topics or {})
        self.unknown_for = unknown_for

    def describe_configs(self, resources: list[Any]) -> dict[Any, _Done]:
        self.describes.append(len(resources))
        if self.unknown_for is None or len(self.describes) <= self.unknown_for:
            unknown = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Unknown topic or partition")
            return {r: _Done(error=unknown) for r in resources}
        return {r: _Done({}) for r in resources}


def _slow_manager(target: _Admin, source: _Admin | None = None) -> TopicManager:
    clusters = {
        a: ClusterConfig(alias=a, bootstrap_servers=f"127.0.0.1:{n}")
        for a, n in (("A", 1), ("B", 2))
    }
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(".*",))
    return TopicManager(
        flow,
        clusters["A"],
        clusters["B"],
        source_admin=source or _Admin({"orders": 1}),
        target_admin=target,
        timeout=0.3,
    )


def test_a_new_topic_the_broker_learns_of_a_little_later_is_waited_for() -> None:
    target = _SlowBroker(unknown_for=2)
    assert list(_slow_manager(target).sync()) == ["orders"]
    assert len(target.describes) == 3


def test_a_new_topic_the_broker_never_learns_of_is_retried_later_never_fatal() -> None:
    # A busy broker still creating thousands of partitions' logs gets there: the flow asks
    # again after a backoff (KafkaUnavailableError), naming the topic and where to look.
    with pytest.raises(KafkaUnavailableError) as caught:
        _slow_manager(_SlowBroker(unknown_for=None)).sync()
    message = str(caught.value)
    assert "cluster B (127.0.0.1:2)" in message
    assert "topic A.orders" in message and "asking again" in message
    assert "the broker's log says why" in message


def test_a_source_topic_its_broker_learns_of_a_little_later_is_waited_for() -> None:
    # A topic created a moment ago on a cluster of several brokers: listed by one, not yet
    # known to the one that answers its settings.
    source = _SlowBroker(unknown_for=2, topics={"orders": 1})
    target = _Admin({})
    assert list(_slow_manager(target, source).sync()) == ["orders"]
    assert len(source.describes) == 3
    assert target.topics == {"A.orders": 1}


def test_a_source_topic_never_known_to_its_broker_is_asked_again_later_never_fatal() -> None:
    # Deleted since it was listed, or a broker that lags: the flow asks again after a backoff.
    source = _SlowBroker(unknown_for=None, topics={"orders": 1})
    target = _Admin({})
    with pytest.raises(KafkaUnavailableError) as caught:
        _slow_manager(target, source).sync()
    message = str(caught.value)
    assert "cluster A (127.0.0.1:1) does not know a topic it listed" in message
    assert "topic orders" in message and "asking again" in message
    assert target.topics == {}  # nothing created without its settings
