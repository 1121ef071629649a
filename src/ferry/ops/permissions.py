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

__all__ = [
    "CAPABILITY_PERMISSIONS",
    "FERRY_PERMISSIONS",
    "Permission",
    "missing_permissions",
    "permissions_for",
]

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
    # Without it the copy itself stops (`ferry doctor` calls that an error); without the others
    # a part of the flow (checkpoints, settings, ACLs, heartbeats) is not kept (a warning).
    stops: bool = False
    # The flow settings (FlowConfig fields, any one of them on) that need this row; "" for
    # every flow.
    needed_by: str | tuple[str, ...] = ""
    # A command run now and then, not the flow, that needs the row (CAPABILITY_PERMISSIONS):
    # without it that command is refused; replication is not touched (`ferry doctor` notes).
    capability: str = ""

    def needed(self, settings: object) -> bool:
        """Whether a flow with these settings needs the row (its `needed_by` on, or none)."""
        names = (self.needed_by,) if isinstance(self.needed_by, str) else self.needed_by
        return not self.needed_by or any(getattr(settings, name) for name in names)

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
    Permission(
        "source", "TOPIC", "*", "LITERAL", "DESCRIBE", "topic metadata and offsets", stops=True
    ),
    Permission("source", "TOPIC", "*", "LITERAL", "READ", "copy the records", stops=True),
    Permission(
        "source",
        "TOPIC",
        "*",
        "LITERAL",
        "DESCRIBE_CONFIGS",
        "create remote topics alike",
        stops=True,
    ),
    Permission(
        "source",
        "TOPIC",
        "heartbeats",
        "LITERAL",
        "CREATE",
        "heartbeats topic",
        needed_by="emit_heartbeats_enabled",
    ),
    Permission(
        "source",
        "TOPIC",
        "heartbeats",
        "LITERAL",
        "WRITE",
        "emit heartbeats",
        needed_by="emit_heartbeats_enabled",
    ),
    Permission(
        "source",
        "GROUP",
        "*",
        "LITERAL",
        "DESCRIBE",
        "read groups' committed offsets",
        needed_by="emit_checkpoints_enabled",
    ),
    Permission(
        "source",
        "CLUSTER",
        "kafka-cluster",
        "LITERAL",
        "DESCRIBE",
        "read topic ACLs",
        needed_by="sync_topic_acls_enabled",
    ),
    Permission(
        "target", "TOPIC", "*", "LITERAL", "DESCRIBE", "topic metadata and offsets", stops=True
    ),
    Permission(
        "target", "TOPIC", "*", "LITERAL", "CREATE", "create remote and internal topics", stops=True
    ),
    Permission(
        "target", "TOPIC", "*", "LITERAL", "WRITE", "write copies, runs, checkpoints", stops=True
    ),
    Permission(
        "target", "TOPIC", "*", "LITERAL", "READ", "read offset runs and checkpoints", stops=True
    ),
    Permission("target", "TOPIC", "*", "LITERAL", "ALTER", "add partitions the source gained"),
    Permission(
        "target",
        "TOPIC",
        "*",
        "LITERAL",
        "DESCRIBE_CONFIGS",
        "compare topic settings",
        needed_by="sync_topic_configs_enabled",
    ),
    Permission(
        "target",
        "TOPIC",
        "*",
        "LITERAL",
        "ALTER_CONFIGS",
        "sync topic settings",
        needed_by="sync_topic_configs_enabled",
    ),
    Permission(
        "target", "GROUP", "*", "LITERAL", "DESCRIBE", "read positions and groups", stops=True
    ),
    Permission(
        "target", "GROUP", "*", "LITERAL", "READ", "commit positions, sync groups", stops=True
    ),
    Permission(
        "target",
        "TRANSACTIONAL_ID",
        "ferry:",
        "PREFIXED",
        "DESCRIBE",
        "exactly-once copies",
        stops=True,
    ),
    Permission(
        "target", "TRANSACTIONAL_ID", "ferry:", "PREFIXED", "WRITE", "exactly-once copies", True
    ),
    Permission(
        "target",
        "CLUSTER",
        "kafka-cluster",
        "LITERAL",
        "ALTER",
        "create synced ACLs, and the DENYs that protect remote topics",
        needed_by=("sync_topic_acls_enabled", "protect_remote_topics"),
    ),
)


# What the disaster-recovery commands need beyond the flow's rows, only when they run. Granted
# to ferry's principal by nobody by default: `ferry doctor` names each as an optional
# capability. `<source>` and `<target>` stand for the flow's aliases.
CAPABILITY_PERMISSIONS: tuple[Permission, ...] = tuple(
    Permission(
        side,
        "CLUSTER",
        "kafka-cluster",
        "LITERAL",
        operation,
        why,
        capability="ferry switchover",
    )
    for side in ("source", "target")
    for operation, why in (
        ("DESCRIBE", "read the ACLs that grant writes, to fence and move them"),
        ("ALTER", "create and delete the fence's and the moved writers' ACLs"),
    )
) + tuple(
    Permission(
        "target",
        "TRANSACTIONAL_ID",
        "ferry-reconcile-<source>-to-<target>",
        "LITERAL",
        operation,
        "copy the stranded tail exactly once",
        capability="ferry reconcile --replay",
    )
    for operation in ("DESCRIBE", "WRITE")
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
    side: Side,
    allowed: Mapping[tuple[str, str], frozenset[str]],
    rows: tuple[Permission, ...] = FERRY_PERMISSIONS,
) -> list[Permission]:
    """The rows of `side` whose operation is not in what the cluster said the principal may do
    on (resource, name) (Kafka's authorized operations, implied ones included). A row whose
    resource was not looked at (absent from `allowed`) is not judged: no guessing."""
    return [
        row
        for row in rows
        if row.side == side
        and (row.resource, row.name) in allowed
        and row.operation not in allowed[(row.resource, row.name)]
    ]
