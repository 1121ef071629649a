"""The driver's watch over running leases: source ends for the lag, and assignment changes.

Between leases nobody plans, so this thread does what the planner does per batch:

- every `ENDS_INTERVAL_SECONDS` it reads the source's last stable offsets of the running
  lease's partitions into the flow state, so the lag (`ferry run`'s view, `/metrics`) is
  current while a lease runs;
- every `refresh.topics.interval.seconds` it asks the source which topics the flow selects
  now; when they differ from the running lease's (a topic created or deleted, partitions
  added), it leaves the flow's replan marker, the leased tasks end after their current
  slice, and the planner plans the next lease with the new assignment. So a new topic waits
  for the refresh interval, not for the lease to run out. It compares the topics' ids too:
  a topic deleted and created again under its name while the lease's consumers could not
  see it (the link to the source down, or both within one fetch) is read by them from
  ferry's position on, which lies inside the new topic. The lease ends, and the planner sets
  the position back to the new topic's start (engine/plan/topic_ids.py): what the lease
  copied of the new topic before that is copied again, never skipped;
- every `ENDS_INTERVAL_SECONDS` it counts Spark's task slots (the cores of live executors);
  when they change (an executor or a worker lost, or one back), it writes each leased
  flow's share of them and leaves the replan marker: a lease holds its slot for the whole
  lease, so after a loss the bins of the lost executors would otherwise wait behind the
  running ones for a whole lease, and a worker that came back would sit idle. The next
  lease is planned over the slots there are.

A cluster that does not answer is skipped here: the copy itself reports it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ferry.config.model import FerryConfig, FlowConfig
from ferry.engine.flow_state import FlowState, tp_key
from ferry.engine.plan.remote_topics import TopicManager
from ferry.engine.plan.topic_ids import source_topic_ids
from ferry.errors import FerryError

__all__ = ["AssignmentWatch"]

ENDS_INTERVAL_SECONDS = 2.0


class AssignmentWatch:
    def __init__(
        self,
        config: FerryConfig,
        flows: list[tuple[FlowConfig, FlowState]],
        stopping: Callable[[], bool],
        slots: Callable[[], int] | None = None,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self._config = config
        self._flows = flows
        self._stopping = stopping
        self._slots = slots  # each leased flow's share of Spark's live cores
        self._seen_slots: int | None = None
        self._notice = notice or (lambda _message: None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ferry-lease-watch", daemon=True)
        self._managers: dict[str, TopicManager] = {}
        self._said: set[tuple[str, str, str]] = set()  # (flow, topic, new id) re-created
        # Per flow: the running lease (when it was planned) and the ids the watch saw first
        # under it, for topics the lease was planned without an id for.
        self._first_seen: dict[str, tuple[float | None, dict[str, str]]] = {}

    def start(self) -> AssignmentWatch:
        if self._flows:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        next_check = {flow.name: 0.0 for flow, _ in self._flows}
        while not self._stop.wait(ENDS_INTERVAL_SECONDS):
            if self._stopping():
                return
            now = time.monotonic()
            self.check_slots()
            for flow, state in self._flows:
                self.read_ends(flow, state)
                if flow.refresh_topics_enabled and now >= next_check[flow.name]:
                    next_check[flow.name] = now + max(1, flow.refresh_topics_interval_seconds)
                    self.check(flow, state)

    def check_slots(self) -> bool:
        """Write the flows' share of Spark's slots and replan their leases when it changed."""
        if self._slots is None:
            return False
        try:
            slots = self._slots()
        except Exception:  # Spark stopping under us: the runner reports it
            return False
        if slots == self._seen_slots:
            return False
        previous, self._seen_slots = self._seen_slots, slots
        for _flow, state in self._flows:
            state.write_slots(slots)  # 0: no executor yet (or none left); the planner waits
        if previous is None or slots <= 0:
            return False  # the run's first count, or nothing to plan over
        self._notice(
            f"Spark's task slots per leased flow changed from {previous} to {slots} "
            "(an executor lost or added): the leases are re-planned over them"
        )
        for _flow, state in self._flows:
            state.replan_marker.touch()
        return True

    def read_ends(self, flow: FlowConfig, state: FlowState) -> None:
        """The source's last stable offsets of the running lease's partitions, for the lag."""
        running = state.lease_topics()
        try:
            ends = self._manager(flow).end_offsets(running) if running else {}
        except FerryError:
            return
        if ends:
            state.write_latest({tp_key(*tp): offset for tp, offset in ends.items()})

    def check(self, flow: FlowConfig, state: FlowState) -> bool:
        """Leave the replan marker if the flow's selection differs from the running lease's;
        a cluster that does not answer is the runner's to report, so it is skipped here."""
        running = state.lease_topics()
        if not running:
            return False  # no lease planned yet
        try:
            selected = self._manager(flow).selected()
        except FerryError:
            return False
        if selected == running and not self._recreated(flow, state, running):
            return False
        state.directory.mkdir(parents=True, exist_ok=True)
        state.replan_marker.touch()
        return True

    def _recreated(self, flow: FlowConfig, state: FlowState, running: dict[str, int]) -> bool:
        """Whether a topic of the running lease has another id now than it was planned with
        (or, planned without one, than the watch first saw under this lease)."""
        lease = state.lease_planned_at()
        seen_lease, first_seen = self._first_seen.get(flow.name, (None, {}))
        if seen_lease != lease:
            first_seen = {}
            self._first_seen[flow.name] = (lease, first_seen)
        known = {**first_seen, **state.lease_topic_ids()}
        now = source_topic_ids(self._manager(flow).source_admin, sorted(running), timeout=10)
        for topic, topic_id in now.items():
            known.setdefault(topic, topic_id)
            first_seen.setdefault(topic, topic_id)
        changed = {t: (known[t], i) for t, i in sorted(now.items()) if known[t] != i}
        for topic, (old, new) in changed.items():
            if (flow.name, topic, new) in self._said:
                continue  # the lease is still ending: said once
            self._said.add((flow.name, topic, new))
            self._notice(
                f"flow {flow.name}: topic {topic} on {flow.source} was deleted and re-created "
                f"under the running lease (its topic id was {old}, is {new}): the lease ends "
                "and the next copies the new topic from its start"
            )
        return bool(changed)

    def _manager(self, flow: FlowConfig) -> TopicManager:
        if flow.name not in self._managers:
            clusters = self._config.clusters
            state = next(s for f, s in self._flows if f.name == flow.name)
            self._managers[flow.name] = TopicManager(
                flow, clusters[flow.source], clusters[flow.target], control=state.selection_control
            )
        return self._managers[flow.name]
