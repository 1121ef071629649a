"""Topic config sync's choice of keys: changed, and not excluded (whole-name regexes)."""

from __future__ import annotations

import re

from ferry.config.model import FlowConfig
from ferry.sync.topic_configs import config_changes

MM2_EXCLUDES = [re.compile(p) for p in FlowConfig(source="A", target="B").config_properties_exclude]


def test_only_changed_keys_are_set() -> None:
    source = {"retention.ms": "100", "cleanup.policy": "compact", "segment.bytes": "1000"}
    remote = {"retention.ms": "100", "cleanup.policy": "delete"}
    assert config_changes(source, remote, MM2_EXCLUDES) == {
        "cleanup.policy": "compact",
        "segment.bytes": "1000",
    }


def test_excluded_keys_are_never_set() -> None:
    source = {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "leader.replication.throttled.replicas": "*",
        "message.timestamp.type": "LogAppendTime",
        "retention.ms": "5",
    }
    assert config_changes(source, {}, MM2_EXCLUDES) == {"retention.ms": "5"}


def test_excludes_match_the_whole_name() -> None:
    excludes = [re.compile("retention")]
    assert config_changes({"retention.ms": "5"}, {}, excludes) == {"retention.ms": "5"}
    assert config_changes({"retention": "5"}, {}, excludes) == {}


def test_nothing_to_do_when_equal() -> None:
    same = {"retention.ms": "5", "cleanup.policy": "compact"}
    assert config_changes(same, dict(same), MM2_EXCLUDES) == {}


# --- one sync pass, with admin clients faked -------------------------------------------------


class _Done:
    def __init__(self, value: object) -> None:
        self._value = value

    def result(self, timeout: float | None = None) -> object:
        return self._value


class _Entry:
    def __init__(self, value: str, source: int) -> None:
        self.value, self.source, self.is_sensitive = value, source, False


class _Admin:
    """Topics with partition counts and configs; records every incremental alter."""

    def __init__(self, topics: dict[str, tuple[int, dict[str, str]]]) -> None:
        self.topics = topics
        self.altered: dict[str, dict[str, str]] = {}

    def list_topics(self, timeout: float | None = None) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(
            topics={
                name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(n)))
                for name, (n, _) in self.topics.items()
            }
        )

    def describe_configs(self, resources: list[object]) -> dict[object, _Done]:
        from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]

        dynamic, default = (
            ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
            ConfigSource.DEFAULT_CONFIG.value,
        )
        answers = {}
        for r in resources:
            configs = self.topics[r.name][1]  # type: ignore[attr-defined]
            entries = {k: _Entry(v, dynamic) for k, v in configs.items()}
            entries.setdefault("segment.bytes", _Entry("1073741824", default))
            answers[r] = _Done(entries)
        return answers

    def incremental_alter_configs(self, resources: list[object]) -> dict[object, _Done]:
        for r in resources:
            self.altered[r.name] = {  # type: ignore[attr-defined]
                e.name: e.value
                for e in r.incremental_configs  # type: ignore[attr-defined]
            }
        return {r: _Done(None) for r in resources}


def _sync(source: _Admin, target: _Admin) -> object:
    from ferry.config.model import ClusterConfig, FerryConfig
    from ferry.sync.topic_configs import TopicConfigSync

    clusters = {a: ClusterConfig(alias=a, bootstrap_servers="127.0.0.1:1") for a in "AB"}
    flow = FlowConfig(source="A", target="B", enabled=True, topics=("orders", "new"))
    config = FerryConfig(clusters=clusters, flows=(flow,))
    return TopicConfigSync(config, flow, source_admin=source, target_admin=target)


def test_a_pass_sets_only_changed_non_default_keys_of_existing_remote_topics() -> None:
    source = _Admin(
        {
            "orders": (
                2,
                {"retention.ms": "5", "cleanup.policy": "compact", "min.insync.replicas": "2"},
            ),
            "new": (1, {"retention.ms": "9"}),  # no remote topic yet: creation copies configs
            "other": (1, {"retention.ms": "9"}),  # not selected
        }
    )
    target = _Admin({"A.orders": (2, {"retention.ms": "5"})})
    report = _sync(source, target).sync()  # type: ignore[attr-defined]
    assert target.altered == {"A.orders": {"cleanup.policy": "compact"}}
    assert report.skipped == ()
    target.altered.clear()
    target.topics["A.orders"] = (2, {"retention.ms": "5", "cleanup.policy": "compact"})
    _sync(source, target).sync()  # type: ignore[attr-defined]
    assert target.altered == {}


def test_a_remote_topic_with_more_partitions_than_its_source_is_reported_once() -> None:
    source = _Admin({"orders": (2, {})})
    target = _Admin({"A.orders": (4, {})})
    sync = _sync(source, target)
    first = sync.sync()  # type: ignore[attr-defined]
    assert len(first.skipped) == 1
    assert "A.orders on B has 4 partitions, its source orders on A 2" in first.skipped[0]
    assert sync.sync().skipped == ()  # type: ignore[attr-defined]
