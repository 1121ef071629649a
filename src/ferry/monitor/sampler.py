"""The Kafka side of `ferry monitor`: one sample of every offset pair a flow is judged by.

Kept apart from the loop (`ferry.monitor.service`) so the loop, the detector and the metrics
can be tested with a fake sampler and no broker. A sample is taken from the outside, with
admin clients (and, for a group's committed offsets, a consumer of the group that never
joins it): the monitor must see what a consumer on B would see, whatever ferry believes it
copied.

For each replicated source partition: A's log end (high watermark) and the log end of its
remote copy on B. With `sync.group.offsets.enabled`, for each group the flow syncs: its
committed offset on A and on B. A remote partition or group offset B does not have yet counts
as 0 (nothing copied), so a replicator that never started is a delay, not a blind spot.

Beside them, the recovery point objective of each source partition, read as `ferry status`
reads it (`ferry.ops.status.read_flow_rpos`: the flow's position on B, A's last stable offset,
the first record not copied): a cluster that does not answer leaves it unknown, not the sample.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import KafkaException

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.errors import FerryError
from ferry.graph.selection import TopicSelector
from ferry.kafka import clients
from ferry.kafka.errors import UNREACHABLE_CODES, kafka_error_of, kafka_errors, unavailable
from ferry.kafka.group_offsets import GroupOffsetError, read_group_offsets
from ferry.kafka.partition_offsets import read_offsets
from ferry.monitor.sync_delay import DelayKind
from ferry.ops.status import read_flow_rpos

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = ["FlowSample", "KafkaSampler", "OffsetPair", "Sampler"]

DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class OffsetPair:
    """One series' offsets this period: A's for a source partition, B's for its copy."""

    kind: DelayKind
    group: str | None  # None for `latest`
    topic: str  # the source topic on A
    remote_topic: str  # its name on B
    partition: int
    a: int
    b: int


@dataclass(frozen=True)
class FlowSample:
    flow: str
    pairs: tuple[OffsetPair, ...]
    # RPO in seconds per source partition (None: not known); None: not read this period.
    rpos: Mapping[tuple[str, int], float | None] | None = None


class Sampler(Protocol):
    def sample(self, flow: FlowConfig) -> FlowSample:
        """Sample every series of `flow`; KafkaUnavailableError if a cluster did not answer."""
        ...

    def close(self) -> None: ...


class KafkaSampler:
    """Samples with one admin client per cluster, reused across periods."""

    def __init__(self, config: FerryConfig, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._config = config
        self._timeout = timeout
        self._admins: dict[str, AdminClient] = {}

    def _admin(self, alias: str) -> AdminClient:
        if alias not in self._admins:
            self._admins[alias] = clients.admin_client(self._config.clusters[alias].admin_config())
        return self._admins[alias]

    def close(self) -> None:
        self._admins.clear()  # librdkafka closes a client when its last reference goes

    def sample(self, flow: FlowConfig) -> FlowSample:
        source = self._config.clusters[flow.source]
        target = self._config.clusters[flow.target]
        policy = flow.replication_policy
        selector = TopicSelector(flow, policy)
        partitions = {
            name: len(md.partitions)
            for name, md in self._topics(source).items()
            if md.error is None and selector.accepts(name)
        }
        remote = {t: policy.remote_topic(flow.source, t) for t in partitions}
        on_b = {
            name: len(md.partitions)
            for name, md in self._topics(target).items()
            if md.error is None and name in remote.values()
        }
        a_ends = self._log_ends(source, [(t, p) for t, n in partitions.items() for p in range(n)])
        b_ends = self._log_ends(
            target, [(remote[t], p) for t in partitions for p in range(on_b.get(remote[t], 0))]
        )
        pairs = [
            OffsetPair(DelayKind.LATEST, None, t, remote[t], p, end, b_ends.get((remote[t], p), 0))
            for (t, p), end in sorted(a_ends.items())
        ]
        if flow.sync_group_offsets_enabled:
            pairs += self._group_pairs(flow, source, target, remote)
        return FlowSample(flow.name, tuple(pairs), self._rpos(flow))

    def _rpos(self, flow: FlowConfig) -> Mapping[tuple[str, int], float | None] | None:
        try:
            return read_flow_rpos(self._config, flow, timeout=self._timeout)
        except FerryError:
            return None  # a cluster stopped answering since the offsets were read: not known

    # --- Kafka requests -------------------------------------------------------------------

    def _topics(self, cluster: ClusterConfig) -> dict[str, Any]:
        with kafka_errors(cluster, "list topics"):
            topics: dict[str, Any] = (
                self._admin(cluster.alias).list_topics(timeout=self._timeout).topics
            )
        return topics

    def _log_ends(
        self, cluster: ClusterConfig, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        def answer(_tp: Any, future: Any) -> int | None:
            try:
                return int(future.result(self._timeout + 5).offset)
            except (KafkaException, TimeoutError) as exc:
                self._raise_if_unreachable(cluster, exc)
                return None  # anything else (a topic deleted a moment ago): no sample for it

        admin = self._admin(cluster.alias)
        return read_offsets(
            admin, partitions, timeout=self._timeout, committed_only=False, answer=answer
        )

    def _group_pairs(
        self,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        remote: dict[str, str],
    ) -> list[OffsetPair]:
        include = [re.compile(p) for p in flow.groups]
        exclude = [re.compile(p) for p in flow.groups_exclude]
        pairs: list[OffsetPair] = []
        for group in sorted(self._groups(source)):
            if not any(p.fullmatch(group) for p in include):
                continue
            if any(p.fullmatch(group) for p in exclude):
                continue
            committed_a = {
                tp: offset
                for tp, offset in self._committed(source, group, None, topics=remote).items()
                if tp[0] in remote and offset >= 0
            }
            if not committed_a:
                continue
            asked = [(remote[t], p) for t, p in committed_a]
            committed_b = self._committed(target, group, asked)
            for (t, p), offset in sorted(committed_a.items()):
                b = max(0, committed_b.get((remote[t], p), 0))
                pairs.append(OffsetPair(DelayKind.CONSUME, group, t, remote[t], p, offset, b))
        return pairs

    def _groups(self, cluster: ClusterConfig) -> list[str]:
        try:
            result = (
                self._admin(cluster.alias)
                .list_consumer_groups(request_timeout=self._timeout)
                .result(self._timeout + 5)
            )
        except (KafkaException, TimeoutError) as exc:
            raise unavailable(cluster, exc) from None
        return [str(listing.group_id) for listing in result.valid]

    def _committed(
        self,
        cluster: ClusterConfig,
        group: str,
        partitions: list[tuple[str, int]] | None,
        *,
        topics: Iterable[str] | None = None,
    ) -> dict[tuple[str, int], int]:
        """Read by a consumer of the group, never the admin API (kafka/group_offsets.py)."""
        try:
            return read_group_offsets(
                cluster,
                group,
                partitions,
                topics=None if topics is None else set(topics),
                timeout=self._timeout,
            )
        except GroupOffsetError:
            return {}  # e.g. the group was deleted since it was listed
        except KafkaException as exc:
            self._raise_if_unreachable(cluster, exc)
            return {}

    @staticmethod
    def _raise_if_unreachable(cluster: ClusterConfig, exc: BaseException) -> None:
        error = kafka_error_of(exc)
        if error is None or error.code() in UNREACHABLE_CODES:
            raise unavailable(cluster, exc) from None
