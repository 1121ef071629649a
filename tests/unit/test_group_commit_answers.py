"""GroupAdmin.commit (offsets/groups.py) and what a coordinator answers: a coordinator still
moving is asked again; a group with members refuses (GroupActiveError, which the group offset
sync and failover report as "active"); no coordinator found in time is a cluster that does not
answer (KafkaUnavailableError, retried by the caller), never a crash or a silent success."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.kafka.group_offsets import GroupOffsetError
from ferry.offsets import groups
from ferry.offsets.groups import GroupActiveError, GroupAdmin

TP = tuple[str, int]
OFFSETS = {("A.orders", 0): 10, ("A.orders", 1): 20}


def _admin(monkeypatch: pytest.MonkeyPatch, answers: list[BaseException | None]) -> list[Any]:
    """A GroupAdmin of cluster B whose commits get `answers` in turn (None: committed)."""
    calls: list[Any] = []

    def commit(cluster: ClusterConfig, group: str, offsets: Mapping[TP, int], **_: Any) -> None:
        calls.append((cluster.alias, group, dict(offsets)))
        answer = answers.pop(0)
        if answer is not None:
            raise answer

    monkeypatch.setattr(groups, "commit_group_offsets", commit)
    return calls


def _partition_error(code: int) -> GroupOffsetError:
    return GroupOffsetError(("A.orders", 1), KafkaError(code))


CLUSTER = ClusterConfig(alias="B", bootstrap_servers="127.0.0.1:1")


def test_a_moving_coordinator_is_asked_again_until_it_takes_the_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _admin(
        monkeypatch,
        [
            _partition_error(KafkaError.COORDINATOR_NOT_AVAILABLE),
            KafkaException(KafkaError(KafkaError.NOT_COORDINATOR)),
            None,
        ],
    )
    GroupAdmin(CLUSTER, timeout=10).commit("g1", OFFSETS)
    assert calls == [("B", "g1", OFFSETS)] * 3


@pytest.mark.parametrize(
    "refusal",
    [
        _partition_error(KafkaError.UNKNOWN_MEMBER_ID),
        KafkaException(KafkaError(KafkaError.ILLEGAL_GENERATION)),
        KafkaException(KafkaError(KafkaError.STALE_MEMBER_EPOCH)),
    ],
    ids=["partition-unknown-member", "request-illegal-generation", "request-stale-epoch"],
)
def test_a_group_with_members_refuses_and_is_named(
    monkeypatch: pytest.MonkeyPatch, refusal: BaseException
) -> None:
    calls = _admin(monkeypatch, [refusal])
    with pytest.raises(GroupActiveError, match=r"cluster B: group busy\[1\] has active members"):
        GroupAdmin(CLUSTER, timeout=10).commit("busy[1]", OFFSETS)
    assert len(calls) == 1  # refused: not asked again


def test_no_coordinator_in_time_is_a_cluster_that_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _admin(monkeypatch, [KafkaException(KafkaError(KafkaError._WAIT_COORD))])
    with pytest.raises(KafkaUnavailableError, match="cluster B"):
        GroupAdmin(CLUSTER, timeout=10).commit("g1", OFFSETS)


def test_a_partition_refused_for_another_reason_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _admin(monkeypatch, [_partition_error(KafkaError.OFFSET_METADATA_TOO_LARGE)])
    named = r"could not commit group g1 at A\.orders partition 1"
    with pytest.raises(FerryError, match=named) as e:
        GroupAdmin(CLUSTER, timeout=10).commit("g1", OFFSETS)
    assert not isinstance(e.value, GroupActiveError)


def test_nothing_to_commit_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _admin(monkeypatch, [])
    GroupAdmin(CLUSTER, timeout=10).commit("g1", {})
    assert calls == []
