"""The continuous audit's rules, pure: which records a round audits, when it alerts.

A round at time T audits every record the source still holds whose timestamp lies in a
*closed* bucket: buckets are `audit.interval.seconds` wide and aligned to the epoch, and the
bucket holding T is still open (producers are writing into it), so a round audits the records
stamped before that bucket's start (`closed_until`). Records in closed buckets can still be in
flight (ferry copies behind, or a producer's late timestamp): the audit's own rule (diff.py)
counts every record at or after the flow's replicated position, read as the round starts, as in
flight, never as missing, and the next round looks at it again. A round re-audits all closed
buckets, not only the newest: it reads the topics whole anyway (the Kafka source reads offset
ranges, not times), and so a loss stays in the gauge until it is repaired or the source's
retention removes the original, and a record that arrived late in an old bucket is seen.

Alerts follow the gauge per (flow, topic): an alert when a round finds more missing records
than the round before (0 to n is the common case; a rise while alerting is a new loss), a
recovery when a round finds none after finding some, or the topic is no longer audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AuditAlerts", "Verdict", "closed_until"]


def closed_until(now_ms: int, width_ms: int) -> int:
    """The end (exclusive) of the newest closed bucket at `now_ms`: the open bucket's start."""
    return now_ms - now_ms % width_ms


@dataclass(frozen=True)
class Verdict:
    """What one round changed for one flow: topics newly alerting, topics recovered."""

    raised: tuple[str, ...] = ()  # missing rose since the last round
    recovered: tuple[str, ...] = ()  # missing back to 0
    gone: tuple[str, ...] = ()  # no longer audited; `recovered` too if they were alerting


class AuditAlerts:
    """Each topic's missing count as of the last round, per flow; `judge` compares a round's."""

    def __init__(self) -> None:
        self._missing: dict[str, dict[str, int]] = {}

    def judge(self, flow: str, missing: Mapping[str, int]) -> Verdict:
        before = self._missing.get(flow, {})
        raised = tuple(t for t, n in missing.items() if n > before.get(t, 0))
        gone = tuple(t for t in before if t not in missing)
        recovered = tuple(t for t, n in before.items() if n > 0 and missing.get(t, 0) == 0)
        self._missing[flow] = dict(missing)
        return Verdict(raised, recovered, gone)

    def alerting(self, flow: str) -> set[str]:
        return {t for t, n in self._missing.get(flow, {}).items() if n > 0}
