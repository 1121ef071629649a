"""MM2's rules for checkpoints and group offset sync. Pure code, no I/O.

Checkpoints only move forward (KAFKA-15905): after a restart, a re-read index or a replay, a
newly computed downstream offset may be lower than the one already published; publishing it
would send a failed-over group back over records it has consumed. The one exception is the
source group itself rewinding (a reset to reprocess): then the checkpoint follows it.

Group offset sync (KIP-545) writes only to groups nobody is using on the target, and never
moves a target offset backwards: a group that consumed further on the target keeps its place.
"""

from __future__ import annotations

from ferry.kafka.mm2_records import Checkpoint

__all__ = ["offsets_to_sync", "should_emit"]


def should_emit(previous: Checkpoint | None, upstream: int, downstream: int) -> bool:
    """Whether to publish the checkpoint (upstream, downstream) after `previous`."""
    if previous is None:
        return True
    if upstream < previous.upstream_offset:
        return True  # the source group rewound; follow it
    if downstream < previous.offset:
        return False  # never move a published checkpoint back
    return (upstream, downstream) != (previous.upstream_offset, previous.offset)


def offsets_to_sync(
    target_active: bool,
    target_committed: dict[tuple[str, int], int],
    translated: dict[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """The translated offsets to commit on the target for one group (MM2's rules)."""
    if target_active:
        return {}
    return {
        tp: offset
        for tp, offset in translated.items()
        if tp not in target_committed or target_committed[tp] < offset
    }
