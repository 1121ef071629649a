"""GroupAdmin.committed with an index of `__consumer_offsets` (offsets/groups.py): a group the
index knows is asked for the partitions it committed in, of those it would be asked for
anyway; a group the index does not know, or an index that could not be read, is asked for
every partition, as without it."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from ferry.config.model import ClusterConfig
from ferry.offsets import groups
from ferry.offsets.groups import GroupAdmin

TP = tuple[str, int]
EVERY = [("orders", 0), ("orders", 1), ("payments", 0), ("payments", 1)]


class _Index:
    def __init__(self, known: dict[str, frozenset[TP]]) -> None:
        self.known = known

    def partitions_of(self, group: str) -> frozenset[TP] | None:
        return self.known.get(group)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[list[TP] | None]:
    calls: list[list[TP] | None] = []

    def read(
        cluster: ClusterConfig, group: str, partitions: Collection[TP] | None, **_: Any
    ) -> dict[TP, int]:
        calls.append(None if partitions is None else sorted(partitions))
        return {}

    monkeypatch.setattr(groups, "read_group_offsets", read)
    monkeypatch.setattr(GroupAdmin, "_every_partition", lambda self: list(EVERY))
    return calls


def _admin(index: _Index | None) -> GroupAdmin:
    cluster = ClusterConfig(alias="A", bootstrap_servers="127.0.0.1:1")
    return GroupAdmin(cluster, timeout=1.0, commits=index)  # type: ignore[arg-type]


def test_a_known_group_is_asked_for_its_own_partitions(asked: list[list[TP] | None]) -> None:
    admin = _admin(_Index({"billing": frozenset({("orders", 1), ("gone", 0)})}))
    admin.committed("billing")
    # "gone" is not a topic of the cluster any more: never asked.
    assert asked == [[("orders", 1)]]


def test_of_the_partitions_a_caller_names_only_those_committed(
    asked: list[list[TP] | None],
) -> None:
    admin = _admin(_Index({"billing": frozenset({("orders", 1), ("payments", 0)})}))
    admin.committed("billing", [("payments", 0), ("payments", 1)])
    assert asked == [[("payments", 0)]]


def test_a_group_with_no_offset_left_is_asked_nothing(asked: list[list[TP] | None]) -> None:
    assert _admin(_Index({"billing": frozenset()})).committed("billing") == {}
    assert asked == [[]]


def test_an_unknown_group_or_no_index_asks_every_partition(
    asked: list[list[TP] | None],
) -> None:
    _admin(_Index({})).committed("billing")
    _admin(_Index({})).committed("billing", [("orders", 0)])
    _admin(None).committed("billing", [("orders", 0)])
    assert asked == [EVERY, [("orders", 0)], [("orders", 0)]]
