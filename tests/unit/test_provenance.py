"""The `ferry.origin` header: `<cluster id>|<alias>|<partition>|<offset>|<topic>` round trips."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.provenance import Origin, origin_prefix

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
topics = st.text(LETTERS + "._-", min_size=1, max_size=249)
aliases = st.text(LETTERS + "_-", min_size=1, max_size=30)
cluster_ids = st.text(LETTERS + "-_", min_size=22, max_size=22)  # base64url UUID, no padding
origins = st.builds(
    Origin,
    cluster_id=cluster_ids,
    alias=aliases,
    topic=topics,
    partition=st.integers(0, 100_000),
    offset=st.integers(0, 2**63 - 1),
)


def test_header_value_format() -> None:
    origin = Origin("MkU3OEVBNTcwNTJENDM2Qg", "A", "orders.eu", 3, 42)
    assert origin.to_bytes() == b"MkU3OEVBNTcwNTJENDM2Qg|A|3|42|orders.eu"


@given(origins)
def test_origin_round_trips_through_bytes(origin: Origin) -> None:
    raw = origin.to_bytes()
    assert isinstance(raw, bytes)
    assert Origin.from_bytes(raw) == origin


@given(origins)
def test_origin_prefix_brackets_the_offset_in_to_bytes(origin: Origin) -> None:
    before, after = origin_prefix(origin.cluster_id, origin.alias, origin.topic, origin.partition)
    assert before.endswith("|")
    assert after.startswith("|")
    assert origin.to_bytes() == f"{before}{origin.offset}{after}".encode()


@given(origins, st.integers(0, 2**63 - 1))
def test_origin_prefix_identifies_one_partition(origin: Origin, other_offset: int) -> None:
    """Every offset of a partition shares the prefix; a neighbour partition does not."""
    before, _after = origin_prefix(origin.cluster_id, origin.alias, origin.topic, origin.partition)
    same = Origin(origin.cluster_id, origin.alias, origin.topic, origin.partition, other_offset)
    neighbour = Origin(
        origin.cluster_id, origin.alias, origin.topic, origin.partition + 1, origin.offset
    )
    assert same.to_bytes().startswith(before.encode())
    assert not neighbour.to_bytes().startswith(before.encode())


def test_topic_with_dots_dashes_and_underscores_is_kept_whole() -> None:
    raw = b"abc-_DEF|eu_west-1|0|0|my.topic-name_v2"
    assert Origin.from_bytes(raw) == Origin("abc-_DEF", "eu_west-1", "my.topic-name_v2", 0, 0)
