"""The two stores translation reads, both compacted topics in a flow's target cluster.

`RunsStore`: the flow's exact offset runs (`ferry-offset-runs.<source>.internal`), folded
into one `OffsetIndex` per source partition, in the order the runs were written.
`CheckpointStore`: MM2-format checkpoints (`<source>.checkpoints.internal`), the latest per
(group, remote topic, partition). Both read incrementally: `refresh()` reads what is new.
"""

from __future__ import annotations

import logging
import threading

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.kafka.mm2_records import Checkpoint, MM2FormatError
from ferry.kafka.offset_runs import OffsetSyncRecord
from ferry.kafka.topic_reader import TopicTail
from ferry.offsets.index import OffsetIndex

__all__ = ["CheckpointStore", "FlowRunsStores", "RunsStore"]

log = logging.getLogger(__name__)


class RunsStore:
    def __init__(
        self, target: ClusterConfig, topic: str, source_alias: str, *, timeout: float = 15.0
    ) -> None:
        self._tail = TopicTail(target, topic, timeout=timeout)
        self._source = source_alias
        self._indexes: dict[tuple[str, int], OffsetIndex] = {}
        self.malformed = 0

    def refresh(self) -> RunsStore:
        for key, value in self._tail.read_new():
            if key is None or value is None:
                continue  # a tombstone: nothing to add
            try:
                record = OffsetSyncRecord.from_bytes(key, value)
            except (ValueError, KeyError, TypeError):
                self.malformed += 1
                continue
            if record.source != self._source:
                continue
            index = self._indexes.setdefault((record.topic, record.partition), OffsetIndex())
            index.add(record.run)
        return self

    def index(self, topic: str, partition: int) -> OffsetIndex:
        """The index of a source partition (empty if nothing of it was replicated)."""
        return self._indexes.get((topic, partition)) or OffsetIndex()

    def has(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self._indexes

    def close(self) -> None:
        self._tail.close()


class CheckpointStore:
    def __init__(self, target: ClusterConfig, topic: str, *, timeout: float = 15.0) -> None:
        self.topic = topic
        self._tail = TopicTail(target, topic, timeout=timeout)
        self._latest: dict[tuple[str, str, int], Checkpoint] = {}
        # The same checkpoints by group: one group's are found without a scan of every one.
        self._by_group: dict[str, dict[tuple[str, int], Checkpoint]] = {}
        self.malformed = 0

    def refresh(self) -> CheckpointStore:
        for key, value in self._tail.read_new():
            if key is None:
                continue
            if value is None:  # a tombstone deletes the checkpoint
                try:
                    c = Checkpoint.from_bytes(key, Checkpoint("", "", 0, 0, 0).value_bytes())
                except MM2FormatError:
                    continue
                self._forget(c.group, c.topic, c.partition)
                continue
            try:
                checkpoint = Checkpoint.from_bytes(key, value)
            except MM2FormatError as exc:
                self.malformed += 1
                log.warning("%s: skipping a record that is not a checkpoint: %s", self.topic, exc)
                continue
            self.remember(checkpoint)
        return self

    def remember(self, checkpoint: Checkpoint) -> None:
        self._latest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
        by_group = self._by_group.setdefault(checkpoint.group, {})
        by_group[(checkpoint.topic, checkpoint.partition)] = checkpoint

    def _forget(self, group: str, topic: str, partition: int) -> None:
        self._latest.pop((group, topic, partition), None)
        by_group = self._by_group.get(group)
        if by_group is not None:
            by_group.pop((topic, partition), None)
            if not by_group:
                del self._by_group[group]

    def latest(self, group: str, topic: str, partition: int) -> Checkpoint | None:
        return self._latest.get((group, topic, partition))

    def of_group(self, group: str) -> list[Checkpoint]:
        return sorted(self._by_group.get(group, {}).values(), key=lambda c: (c.topic, c.partition))

    def groups(self) -> list[str]:
        return sorted(self._by_group)

    def close(self) -> None:
        self._tail.close()


class FlowRunsStores:
    """Each flow's offset runs (`stores(flow)`), read from its target once, on first use;
    closed when the `with` block ends."""

    def __init__(self, config: FerryConfig, *, timeout: float = 15.0) -> None:
        self._config = config
        self._timeout = timeout
        self._stores: dict[str, RunsStore] = {}
        self._lock = threading.Lock()  # groups planned side by side read each flow once

    def __call__(self, flow: FlowConfig) -> RunsStore:
        with self._lock:
            if flow.name not in self._stores:
                policy = flow.replication_policy
                target = self._config.clusters[flow.target]
                topic = policy.offset_runs_topic(flow.source)
                store = RunsStore(target, topic, flow.source, timeout=self._timeout)
                self._stores[flow.name] = store.refresh()
            return self._stores[flow.name]

    def __enter__(self) -> FlowRunsStores:
        return self

    def __exit__(self, *_exc: object) -> None:
        for store in self._stores.values():
            store.close()
