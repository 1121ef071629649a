"""The Confluent schema registry wire format, and the subject a schema has on the target.

Pure code, no I/O. A registry-encoded key or value is a magic byte 0, the schema's id in the
**writer's** registry as 4 big-endian bytes, then the payload (Protobuf puts its message
indexes, varints, first). A copy into another cluster names the same schema by the id the
**target's** registry gave it, so exactly those 4 bytes are rewritten and nothing else: the
payload and Protobuf's indexes are the writer's bytes, and a consumer decoding through the
target's registry reads the record the writer wrote.

What breaks if this were looser: a payload that only looks registry-encoded (starts with 0,
at least 5 bytes) is still a candidate here; whether its id is real is the source registry's
answer (unknown: copied unchanged, and counted). So `schema_id` never guesses, it only reads.

Subjects: under TopicNameStrategy (the serialisers' default) a topic's schemas live in
`<topic>-key` and `<topic>-value`, so on the target they belong under the remote topic's
name (`orders-value` from A becomes `A.orders-value` under the prefix policy), where the
target's consumers and producers of that topic look. Any other subject (RecordNameStrategy's
`<record name>`, TopicRecordNameStrategy's `<topic>-<record name>` of another topic, a
Protobuf import's file name) is kept: it does not name the topic.
"""

from __future__ import annotations

__all__ = [
    "MAGIC_BYTE",
    "ORIGINAL_ID_HEADERS",
    "WIRE_HEADER_SIZE",
    "pick_subject",
    "schema_id",
    "target_subject",
    "with_schema_id",
]

MAGIC_BYTE = 0
WIRE_HEADER_SIZE = 5  # magic byte + 4-byte id
# Header added to a copy whose id was rewritten: the source registry's id, ASCII decimal, so
# an audit can prove the copy is the source record byte for byte (put the id back, compare).
ORIGINAL_ID_HEADERS = {False: "ferry.schema.id.value", True: "ferry.schema.id.key"}
_MAX_ID = 2**32 - 1


def schema_id(payload: bytes | None) -> int | None:
    """The schema id a registry-encoded payload names, or None for any other payload."""
    if payload is None or len(payload) < WIRE_HEADER_SIZE or payload[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(payload[1:WIRE_HEADER_SIZE], "big")


def with_schema_id(payload: bytes, new_id: int) -> bytes:
    """`payload` with its 4 id bytes replaced by `new_id`; every other byte unchanged."""
    if schema_id(payload) is None:
        raise ValueError("not a registry-encoded payload (magic byte 0 and a 4-byte id)")
    if not 0 <= new_id <= _MAX_ID:
        raise ValueError(f"schema id {new_id} does not fit in 4 bytes")
    return payload[:1] + new_id.to_bytes(4, "big") + payload[WIRE_HEADER_SIZE:]


def _strategy_subject(topic: str, is_key: bool) -> str:
    return f"{topic}-{'key' if is_key else 'value'}"


def target_subject(subject: str, topic: str, remote_topic: str, is_key: bool) -> str:
    """The subject on the target of a schema registered under `subject` on the source, for a
    record of `topic` copied to `remote_topic`: TopicNameStrategy's subject of the topic moves
    with it, any other subject is kept."""
    if subject == _strategy_subject(topic, is_key):
        return _strategy_subject(remote_topic, is_key)
    return subject


def pick_subject(subjects: list[str], topic: str, is_key: bool) -> str | None:
    """Of the subjects a schema id is registered under on the source, the one the record's
    writer most likely used: the topic's TopicNameStrategy subject, else one naming the topic
    (TopicRecordNameStrategy), else the first in order (a record name). None: no subject."""
    if not subjects:
        return None
    own = _strategy_subject(topic, is_key)
    if own in subjects:
        return own
    named = sorted(s for s in subjects if s.startswith(f"{topic}-"))
    return named[0] if named else sorted(subjects)[0]
