"""The sliding-window sync-delay rule (China Mobile's MQ_Sync_Monitor), pure.

Watching the replicator's process is not enough: it can be alive and copy nothing. Every
period PT (the sync interval MST, by default `sync.group.offsets.interval.seconds`) the
monitor samples an offset on both sides: A's log end of a partition and B's log end of its
remote copy ("latest"), or a group's committed offset on A and on B ("consume"). Each series
keeps its latest 4 samples in a circular array, indexed by `times`.

From the fourth sample on (times >= 3), with A_sub = A[times-2] - A[times-3]:
if A_sub > threshold and B[times] - B[times-3] < A_sub, the series is in sync delay.
Why three periods of B against one of A: a sync may start just before a sample and take more
than a second, so even two of B's periods cannot be sure to contain one of A's.

`times` counts samples only modulo the window (it never overflows), plus how many samples
were taken, capped. A series whose A side goes backwards (a topic deleted and recreated, a
group reset) starts over: offsets from before and after are not comparable.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["WINDOW", "Alert", "DelayKind", "OffsetWindow", "SyncDelayDetector"]

WINDOW = 4


class DelayKind(Enum):
    LATEST = "latest"  # log end offsets of a partition and its remote copy
    CONSUME = "consume"  # a consumer group's committed offsets on both sides


@dataclass(frozen=True)
class Alert:
    """Why a series is in sync delay: the numbers that triggered it."""

    kind: DelayKind
    a_sub: int  # A[times-2] - A[times-3]
    b_sub: int  # B[times] - B[times-3]
    threshold: int


class OffsetWindow:
    """The latest 4 samples of one (A, B) offset pair, in circular arrays."""

    __slots__ = ("_a", "_b", "_samples", "_times")

    def __init__(self) -> None:
        self._a = [0] * WINDOW
        self._b = [0] * WINDOW
        self._times = 0  # index of the next sample, modulo WINDOW
        self._samples = 0  # samples taken since the last reset, capped at WINDOW

    def _at(self, array: list[int], back: int) -> int:
        """The sample `back` steps before the newest one (0 = newest)."""
        return array[(self._times - 1 - back) % WINDOW]

    def add(self, a: int, b: int, *, kind: DelayKind, threshold: int) -> Alert | None:
        """Record one period's sample; return an Alert if the series is in sync delay."""
        if self._samples and a < self._at(self._a, 0):
            self._samples = 0  # A went backwards: recreated or reset, start a new window
        self._a[self._times] = a
        self._b[self._times] = b
        self._times = (self._times + 1) % WINDOW
        self._samples = min(WINDOW, self._samples + 1)
        if self._samples < WINDOW:  # times < 3
            return None
        # Newest is times, so A[times-2] is 2 back and A[times-3] (the oldest) is 3 back.
        a_sub = self._at(self._a, 2) - self._at(self._a, 3)
        b_sub = self._at(self._b, 0) - self._at(self._b, 3)
        if a_sub > threshold and b_sub < a_sub:
            return Alert(kind, a_sub, b_sub, threshold)
        return None


class SyncDelayDetector:
    """One window per series; a series is keyed by whatever the caller samples.

    For `latest`, a key is (flow, topic, partition); for `consume`, (flow, group, topic,
    partition). `alerting()` lists the series whose latest sample raised an alert.
    """

    def __init__(self, *, min_delay_latest_offset: int, min_delay_consume_offset: int) -> None:
        self._thresholds = {
            DelayKind.LATEST: min_delay_latest_offset,
            DelayKind.CONSUME: min_delay_consume_offset,
        }
        self._windows: dict[tuple[DelayKind, tuple[object, ...]], OffsetWindow] = {}
        self._alerts: dict[tuple[DelayKind, tuple[object, ...]], Alert] = {}

    def observe(self, kind: DelayKind, key: tuple[object, ...], a: int, b: int) -> Alert | None:
        window = self._windows.setdefault((kind, key), OffsetWindow())
        alert = window.add(a, b, kind=kind, threshold=self._thresholds[kind])
        if alert is None:
            self._alerts.pop((kind, key), None)
        else:
            self._alerts[(kind, key)] = alert
        return alert

    def forget(self, kind: DelayKind, key: tuple[object, ...]) -> None:
        """Drop a series that no longer exists (topic deleted, group gone)."""
        self._windows.pop((kind, key), None)
        self._alerts.pop((kind, key), None)

    def alerting(self) -> dict[tuple[DelayKind, tuple[object, ...]], Alert]:
        return dict(self._alerts)
