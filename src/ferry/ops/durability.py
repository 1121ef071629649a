"""Whether a target can keep what it acknowledged: the rules of `ferry doctor`, pure.

ferry commits source progress only after the target acked with acks=all; that promise is only
as good as the target topic's replication. Each finding says in one sentence what would be lost.
Kafka reads happen in `ferry.ops.doctor`; here are only facts in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = [
    "EXIT_ERRORS",
    "EXIT_WARNINGS",
    "Finding",
    "Severity",
    "TopicFacts",
    "exit_code",
    "judge_producer",
    "judge_topic",
]

# "error": replication stops as things are (ferry doctor exits 1); "warning": it runs
# weakened: a loss possible on a broker failure, or a part of the flow (checkpoints, settings,
# ACLs, heartbeats) not kept (exit 2); "note": replication is whole, but an optional command
# (an optional capability: switchover, reconcile --replay) would be refused (exit unchanged).
Severity = Literal["error", "warning", "note"]
EXIT_ERRORS, EXIT_WARNINGS = 1, 2


@dataclass(frozen=True)
class TopicFacts:
    """What doctor read about one topic: its replication factor and its effective configs."""

    cluster: str
    topic: str
    replication_factor: int  # the smallest over its partitions
    configs: Mapping[str, str]


@dataclass(frozen=True)
class Finding:
    kind: str
    cluster: str
    topic: str | None
    detail: str
    severity: Severity = "warning"

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)


def judge_topic(facts: TopicFacts) -> list[Finding]:
    def finding(kind: str, detail: str, severity: Severity = "warning") -> Finding:
        return Finding(kind, facts.cluster, facts.topic, detail, severity)

    rf = facts.replication_factor
    findings = []
    if rf == 1:
        findings.append(
            finding(
                "replication-factor",
                "one replica only: losing that broker's disk loses records ferry copied and "
                "already committed as replicated on the source (raise it to 3)",
            )
        )
    min_isr = _int(facts.configs.get("min.insync.replicas"))
    if min_isr is not None and rf >= 3 and min_isr < 2:
        findings.append(
            finding(
                "min-insync-replicas",
                f"min.insync.replicas={min_isr} with {rf} replicas: acks=all is satisfied by the "
                "leader alone, so an acknowledged record dies with that one broker (set it to 2)",
            )
        )
    if min_isr is not None and min_isr > rf > 0:
        findings.append(
            finding(
                "min-insync-replicas",
                f"min.insync.replicas={min_isr} exceeds its {rf} replicas: the target refuses "
                "every acks=all write, so replication stops (lower it or add replicas)",
                "error",
            )
        )
    if facts.configs.get("unclean.leader.election.enable", "").lower() == "true":
        findings.append(
            finding(
                "unclean-leader-election",
                "unclean.leader.election.enable=true: an out-of-sync replica may become leader "
                "and silently drop records the target acknowledged (set it to false)",
            )
        )
    return findings


def judge_producer(cluster: str, settings: Mapping[str, str]) -> list[Finding]:
    """The producer settings ferry was given for a target, as written (before its own
    overrides): the loader refuses weak ones, so a finding here means a path around it."""
    findings = []
    for key in ("acks", "request.required.acks"):
        value = settings.get(key)
        if value is not None and value.lower() not in ("all", "-1"):
            findings.append(
                Finding(
                    "producer-acks",
                    cluster,
                    None,
                    f"producer {key}={value}: the target acknowledges before its replicas have "
                    "the record, so a leader failure loses it (use acks=all)",
                )
            )
    idempotence = settings.get("enable.idempotence")
    if idempotence is not None and idempotence.lower() != "true":
        findings.append(
            Finding(
                "producer-idempotence",
                cluster,
                None,
                f"producer enable.idempotence={idempotence}: a retried batch can be written twice "
                "or out of order on the target (leave idempotence on)",
            )
        )
    return findings


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def exit_code(findings: list[Finding]) -> int:
    """`ferry doctor`'s exit code, so it can gate a deploy: 1 if a finding stops replication,
    2 if some only weaken it, 0 otherwise (notes of optional capabilities do not count)."""
    if any(f.severity == "error" for f in findings):
        return EXIT_ERRORS
    return EXIT_WARNINGS if any(f.severity == "warning" for f in findings) else 0
