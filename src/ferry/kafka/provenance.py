"""The `ferry.origin` header: where a replicated record was first produced.

Pure code. Every copy carries it; a record that already has one keeps it unchanged, so after
any number of hops it still names the first cluster, topic, partition and offset. Under the
identity policy it is the only thing that stops A->B->A loops (topic names say nothing), and it
lets an auditor match every target record to exactly one source record.

Value (UTF-8): `<cluster id>|<cluster alias>|<partition>|<offset>|<topic>`; the topic goes
last because it is the only free-form part (Kafka topic names cannot contain '|').
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ORIGIN_HEADER", "Origin", "origin_prefix"]

ORIGIN_HEADER = "ferry.origin"


def origin_prefix(cluster_id: str, alias: str, topic: str, partition: int) -> tuple[str, str]:
    """The parts of a header value that are fixed for one partition: (before, after) offset."""
    return f"{cluster_id}|{alias}|{partition}|", f"|{topic}"


@dataclass(frozen=True)
class Origin:
    cluster_id: str
    alias: str
    topic: str
    partition: int
    offset: int

    def to_bytes(self) -> bytes:
        before, after = origin_prefix(self.cluster_id, self.alias, self.topic, self.partition)
        return f"{before}{self.offset}{after}".encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Origin:
        cluster_id, alias, partition, offset, topic = raw.decode().split("|", 4)
        return cls(cluster_id, alias, topic, int(partition), int(offset))
