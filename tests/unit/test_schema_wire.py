"""The Confluent wire format's id rewrite (only the 4 id bytes change) and subject mapping."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.kafka.schema_wire import pick_subject, schema_id, target_subject, with_schema_id

ids = st.integers(min_value=0, max_value=2**32 - 1)
encoded = st.builds(
    lambda sid, body: b"\x00" + sid.to_bytes(4, "big") + body, ids, st.binary(max_size=200)
)


@given(encoded, ids)
def test_rewrite_changes_only_the_four_id_bytes(payload: bytes, new_id: int) -> None:
    copy = with_schema_id(payload, new_id)
    assert len(copy) == len(payload)
    assert copy[0] == 0
    assert schema_id(copy) == new_id
    assert copy[5:] == payload[5:]  # Protobuf's message indexes and the payload: the writer's
    assert with_schema_id(copy, schema_id(payload) or 0) == payload  # and back again


@given(st.binary(max_size=200))
def test_anything_else_is_no_registry_payload(payload: bytes) -> None:
    registry = len(payload) >= 5 and payload[0] == 0
    assert (schema_id(payload) is not None) == registry
    if not registry:
        with pytest.raises(ValueError, match="not a registry-encoded payload"):
            with_schema_id(payload, 1)


def test_protobuf_indexes_after_the_id_are_kept() -> None:
    payload = b"\x00\x00\x00\x00\x07" + b"\x02\x02\x00" + b"\x0a\x03abc"
    assert with_schema_id(payload, 0x01020304) == b"\x00\x01\x02\x03\x04\x02\x02\x00\x0a\x03abc"
    assert schema_id(None) is None
    assert schema_id(b"\x00\x00\x00\x01") is None  # 4 bytes: too short for an id


def test_ids_beyond_four_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="does not fit in 4 bytes"):
        with_schema_id(b"\x00\x00\x00\x00\x01", 2**32)


@pytest.mark.parametrize(
    ("subject", "is_key", "expected"),
    [
        ("orders-value", False, "A.orders-value"),  # TopicNameStrategy moves with the topic
        ("orders-key", True, "A.orders-key"),
        ("orders-key", False, "orders-key"),  # a value schema under the key's subject: kept
        ("com.acme.Order", False, "com.acme.Order"),  # RecordNameStrategy: kept
        ("orders-com.acme.Order", False, "orders-com.acme.Order"),  # TopicRecordNameStrategy
        ("money.proto", False, "money.proto"),  # a Protobuf import
        ("payments-value", False, "payments-value"),  # another topic's subject
    ],
)
def test_target_subject(subject: str, is_key: bool, expected: str) -> None:
    assert target_subject(subject, "orders", "A.orders", is_key) == expected


def test_pick_subject_prefers_the_topics_own() -> None:
    subjects = ["com.acme.Order", "payments-value", "orders-value"]
    assert pick_subject(subjects, "orders", False) == "orders-value"
    assert pick_subject(["z", "orders-com.acme.Order", "a"], "orders", False) == (
        "orders-com.acme.Order"
    )
    assert pick_subject(["z", "a"], "orders", True) == "a"
    assert pick_subject([], "orders", True) is None
