"""The ACLs ferry's own principal needs on a flow's source and target (pure).

One table, read by three readers: the README's list, `ferry local up --security`, which grants
exactly these to its `ferry` principal on every cluster (each can be either side of a flow),
and the least-privilege integration test, which runs ferry with nothing more. A permission
missing from this table shows up there as an authorization error; one granted here but not
needed is a hole the table would document as required.

Names are Kafka's (AclOperation, ResourceType and pattern type names), so a row reads as the
`kafka-acls.sh` options it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["FERRY_PERMISSIONS", "Permission", "missing_permissions", "permissions_for"]

Side = Literal["source", "target"]


@dataclass(frozen=True)
class Permission:
    """ALLOW `operation` on `resource` `name` (a `pattern` match) for ferry's principal."""

    side: Side
    resource: Literal["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]
    name: str
    pattern: Literal["LITERAL", "PREFIXED"]
    operation: str
    why: str

    def grant_command(self, principal: str) -> str:
        """The `kafka-acls.sh` options that grant this row to `principal`."""
        operation = "".join(word.capitalize() for word in self.operation.split("_"))
        resource = {
            "TOPIC": f"--topic '{self.name}'",
            "GROUP": f"--group '{self.name}'",
            "CLUSTER": "--cluster",
            "TRANSACTIONAL_ID": f"--transactional-id '{self.name}'",
        }[self.resource]
        pattern = " --resource-pattern-type prefixed" if self.pattern == "PREFIXED" else ""
        return (
            f"kafka-acls.sh --add --allow-principal User:{principal} --operation {operation} "
            f"{resource}{pattern}"
        )

    def describe(self) -> str:
        """`READ on TOPIC '*'` (or `... prefixed 'ferry:'`)."""
        how = "prefixed " if self.pattern == "PREFIXED" else ""
        return f"{self.operation} on {self.resource} {how}'{self.name}'"


# '*' stands for every name (Kafka's wildcard) where ferry copies, syncs or creates whatever
# the config selects; narrow it to the topics and groups you replicate.
FERRY_PERMISSIONS: tuple[Permission, ...] = (
    Permission("source", "TOPIC", "*", "LITERAL", "DESCRIBE", "topic metadata and offsets"),
    Permission("source", "TOPIC", "*", "LITERAL", "READ", "copy the records"),
    Permission("source", "TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS", "create remote topics alike"),
    Permission("source", "TOPIC", "heartbeats", "LITERAL", "CREATE", "heartbeats topic"),
    Permission("source", "TOPIC", "heartbeats", "LITERAL", "WRITE", "emit heartbeats"),
    Permission("source", "GROUP", "*", "LITERAL", "DESCRIBE", "read groups' committed offsets"),
    Permission("source", "CLUSTER", "kafka-cluster", "LITERAL", "DESCRIBE", "read topic ACLs"),
    Permission("target", "TOPIC", "*", "LITERAL", "DESCRIBE", "topic metadata and offsets"),
    Permission("target", "TOPIC", "*", "LITERAL", "CREATE", "create remote and internal topics"),
    Permission("target", "TOPIC", "*", "LITERAL", "WRITE", "write copies, runs, checkpoints"),
    Permission("target", "TOPIC", "*", "LITERAL", "READ", "read offset runs and checkpoints"),
    Permission("target", "TOPIC", "*", "LITERAL", "ALTER", "add partitions the source gained"),
    Permission("target", "TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS", "compare topic settings"),
    Permission("target", "TOPIC", "*", "LITERAL", "ALTER_CONFIGS", "sync topic settings"),
    Permission("target", "GROUP", "*", "LITERAL", "DESCRIBE", "read positions and groups"),
    Permission("target", "GROUP", "*", "LITERAL", "READ", "commit positions, sync groups"),
    Permission(
        "target", "TRANSACTIONAL_ID", "ferry:", "PREFIXED", "DESCRIBE", "exactly-once copies"
    ),
    Permission("target", "TRANSACTIONAL_ID", "ferry:", "PREFIXED", "WRITE", "exactly-once copies"),
    Permission("target", "CLUSTER", "kafka-cluster", "LITERAL", "ALTER", "create synced ACLs"),
)


def permissions_for(*sides: Side) -> tuple[Permission, ...]:
    """The rows for `sides`, each (resource, name, pattern, operation) once."""
    seen: set[tuple[str, str, str, str]] = set()
    rows = []
    for row in FERRY_PERMISSIONS:
        key = (row.resource, row.name, row.pattern, row.operation)
        if row.side in sides and key not in seen:
            seen.add(key)
            rows.append(row)
    return tuple(rows)


def missing_permissions(
    side: Side, allowed: Mapping[tuple[str, str], frozenset[str]]
) -> list[Permission]:
    """The rows of `side` whose operation is not in what the cluster said the principal may do
    on (resource, name) (Kafka's authorized operations, implied ones included). A row whose
    resource was not looked at (absent from `allowed`) is not judged: no guessing."""
    return [
        row
        for row in permissions_for(side)
        if row.side == side
        and (row.resource, row.name) in allowed
        and row.operation not in allowed[(row.resource, row.name)]
    ]
