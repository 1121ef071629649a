"""Why a cluster that answers still times out: partitions below min.insync.replicas or leaderless.

With 2 of 3 brokers down and min.insync.replicas = 2, a cluster still answers metadata (the
live broker lists itself), but every acks=all write, offset commit and offset fetch on a
partition whose in-sync replicas are fewer than its min.insync.replicas waits
(NOT_ENOUGH_REPLICAS), and a partition without a leader answers nothing. The group
coordinator writes to `__consumer_offsets`, transactions to `__transaction_state`, so a whole
cluster looks "unreachable" (`Failed to get committed offsets: Local: Timed out`) when only
some partitions are short. Said as "unreachable" alone, an operator looks for a network fault.

`shortfalls` and `describe_health` are pure: metadata (topic -> partition -> leader, replicas,
isrs, as `list_topics` gives it) and each topic's min.insync.replicas in, one sentence out.
`diagnose` reads them from the cluster, best effort: a cluster that answers no metadata at all
is truly unreachable and gets no sentence (None), never an exception. Only topics with a
partition whose ISR is smaller than its replicas have their settings read: the rest cannot be
short of min.insync.replicas unless misconfigured (min above the replication factor, which
`ferry doctor` reports).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]  # no __all__: not re-exported

from ferry.config.model import ClusterConfig
from ferry.errors import FerryError, KafkaUnavailableError
from ferry.kafka import clients
from ferry.kafka.admin_batches import MAX_CONFIG_RESOURCES_PER_REQUEST, submit

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = [
    "DIAGNOSIS_SECONDS",
    "MAX_EXAMPLES",
    "Explainer",
    "PartitionMeta",
    "Shortfall",
    "broker_address",
    "describe_health",
    "diagnose",
    "shortfalls",
    "topics_to_describe",
]

NO_LEADER = -1  # librdkafka's leader of a partition that has none
MAX_EXAMPLES = 5  # partitions named per kind of shortfall; the counts are exact
DIAGNOSIS_SECONDS = 5.0  # a cluster that answers at all lists its topics well within this
# Their partitions explain a cluster-wide timeout: offset commits and fetches, transactions.
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


class PartitionMeta(Protocol):
    """A partition as `list_topics` describes it (confluent-kafka's `PartitionMetadata`)."""

    @property
    def leader(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def isrs(self) -> Sequence[int]: ...


Metadata = Mapping[str, Mapping[int, PartitionMeta]]


@dataclass(frozen=True)
class Shortfall:
    """A partition that cannot take acks=all writes: no leader, or ISR below `min_isr`."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int | None  # None: the partition has no leader (whatever its setting)

    @property
    def leaderless(self) -> bool:
        return self.min_isr is None

    def example(self) -> str:
        where = f"{self.topic}-{self.partition}"
        if self.leaderless:
            return f"{where}: replicas {list(self.replicas)}, ISR {list(self.isr)}"
        return f"{where}: ISR {list(self.isr)} < {self.min_isr}"


def topics_to_describe(metadata: Metadata) -> list[str]:
    """The topics whose min.insync.replicas is worth reading: a led partition lacks a replica
    in its ISR (leaderless partitions are short whatever the setting)."""
    return sorted(
        topic
        for topic, partitions in metadata.items()
        if any(p.leader != NO_LEADER and len(p.isrs) < len(p.replicas) for p in partitions.values())
    )


def shortfalls(metadata: Metadata, min_isr: Mapping[str, int]) -> list[Shortfall]:
    """Every leaderless partition, and every led one whose ISR is below its topic's
    min.insync.replicas (a topic missing from `min_isr` is not judged on its ISR); the
    internal topics first, since they stall a cluster's offsets and transactions."""
    found = []
    for topic, partitions in metadata.items():
        minimum = min_isr.get(topic)
        for number, p in partitions.items():
            isr = tuple(p.isrs)
            if p.leader == NO_LEADER:
                found.append(Shortfall(topic, number, tuple(p.replicas), isr, None))
            elif minimum is not None and len(isr) < minimum:
                found.append(Shortfall(topic, number, tuple(p.replicas), isr, minimum))
    return sorted(found, key=lambda s: (s.topic not in INTERNAL_TOPICS, s.topic, s.partition))


def describe_health(
    alias: str,
    listed: Iterable[int],
    metadata: Metadata,
    min_isr: Mapping[str, int],
    examples: int = MAX_EXAMPLES,
    silent: Iterable[int] = (),
) -> str | None:
    """One sentence saying why writes and offset commits on `alias` wait, or None when no
    partition is short and every broker answers. `listed`: the brokers the metadata lists;
    the cluster's size is taken as every broker listed or named as a replica (at least the
    highest replication factor). `silent`: listed brokers that do not answer at their own
    address. With its controller quorum lost, a cluster cannot shrink an ISR or fence a dead
    broker, so its metadata still shows them whole: only asking each broker tells."""
    short = shortfalls(metadata, min_isr)
    quiet = sorted(set(silent))
    if quiet and not short:
        listed_ids = sorted(set(listed))
        return (
            f"cluster {alias} answers, but {_count(len(quiet), 'broker', 'brokers')} of the "
            f"{len(listed_ids)} it lists ({', '.join(map(str, quiet))}) "
            f"{'does' if len(quiet) == 1 else 'do'} not: partitions led there have no leader "
            "until another takes over, and partitions with fewer in-sync replicas left than "
            "min.insync.replicas take no writes or offset commits (NOT_ENOUGH_REPLICAS) until "
            "the brokers are back; ferry waits and retries, nothing is lost"
        )
    if not short:
        return None
    up = sorted(set(listed))
    known = set(up)
    for partitions in metadata.values():
        for p in partitions.values():
            known.update(p.replicas)
    below = [s for s in short if not s.leaderless]
    leaderless = [s for s in short if s.leaderless]
    codes = ", ".join(
        code
        for code, some in (("NOT_ENOUGH_REPLICAS", below), ("LEADER_NOT_AVAILABLE", leaderless))
        if some
    )
    brokers = ", ".join(str(b) for b in up) or "none"
    return (
        f"cluster {alias} answers ({len(up)} of {len(known)} brokers listed: {brokers}) but "
        f"{_count(len(below), 'partition has', 'partitions have')} fewer in-sync replicas than "
        f"min.insync.replicas{_examples(below, examples)} and "
        f"{_count(len(leaderless), 'has', 'have')} no leader{_examples(leaderless, examples)}: "
        f"writes and offset commits there wait ({codes}) until their replicas are back; "
        "ferry waits and retries, nothing is lost"
    )


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _examples(short: list[Shortfall], limit: int) -> str:
    if not short:
        return ""
    return f" (e.g. {', '.join(s.example() for s in short[:limit])})"


def diagnose(cluster: ClusterConfig, timeout: float) -> str | None:
    """Why `cluster` answers metadata but times out (`describe_health`), read within about
    `timeout` seconds; None when nothing is short or the cluster answers no metadata."""
    deadline = time.monotonic() + timeout
    try:
        admin = clients.admin_client(cluster.admin_config())
        answer = admin.list_topics(timeout=timeout)
        metadata = {name: md.partitions for name, md in answer.topics.items()}
        min_isr = _min_insync(admin, topics_to_describe(metadata), deadline)
    except (KafkaException, TimeoutError):  # no metadata: truly unreachable, nothing to add
        return None
    silent = _silent_brokers(cluster, answer.brokers, deadline)
    return describe_health(cluster.alias, answer.brokers, metadata, min_isr, silent=silent)


def broker_address(name: str) -> str:
    """host:port of a librdkafka broker name: `127.0.0.1:9092/1` in plaintext,
    `sasl_ssl://127.0.0.1:9093/1` with any other security protocol."""
    return name.split("://", 1)[-1].split("/", 1)[0]


def _silent_brokers(
    cluster: ClusterConfig, brokers: Mapping[int, Any], deadline: float
) -> list[int]:
    """The listed brokers that answer no metadata request at their own address by `deadline`
    (each asked by a client of its own, in parallel)."""

    def answers(broker: Any) -> bool:
        address = f"{broker.host}:{broker.port}"
        admin = clients.admin_client(
            {**cluster.admin_config(), "bootstrap.servers": address, "log_level": 0}
        )
        try:
            answer = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
        except KafkaException:
            return False
        return broker_address(str(answer.orig_broker_name)) == address

    if not brokers:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(brokers))) as pool:
        results = dict(zip(brokers, pool.map(answers, brokers.values()), strict=True))
    return sorted(b for b, ok in results.items() if not ok)


def _min_insync(admin: AdminClient, topics: list[str], deadline: float) -> dict[str, int]:
    """Each topic's min.insync.replicas, as far as the brokers answer before `deadline`."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    remaining = max(0.1, deadline - time.monotonic())
    futures = submit(
        lambda batch: admin.describe_configs(batch, request_timeout=remaining),
        resources,
        MAX_CONFIG_RESOURCES_PER_REQUEST,
    )
    found: dict[str, int] = {}
    for resource, future in futures.items():
        try:
            entry = future.result(max(0.0, deadline - time.monotonic()))["min.insync.replicas"]
            found[resource.name] = int(entry.value)
        except (KafkaException, TimeoutError, KeyError, TypeError, ValueError):
            continue  # not read in time or refused: that topic is not judged on its ISR
    return found


class Explainer:
    """A status read's errors, each followed by why its cluster times out if `diagnose` finds
    a reason; each cluster is diagnosed once, so a down cluster costs one more wait, not one
    per error."""

    def __init__(
        self,
        clusters: Iterable[ClusterConfig],
        timeout: float = DIAGNOSIS_SECONDS,
        diagnose: Callable[[ClusterConfig, float], str | None] = diagnose,
    ) -> None:
        self._clusters = {c.alias: c for c in clusters}
        self._timeout = timeout
        self._diagnose = diagnose
        self._done: set[str] = set()

    def lines(self, error: FerryError) -> list[str]:
        """`str(error)`, then the diagnosis of its cluster the first time it is unavailable."""
        found = [str(error)]
        if not isinstance(error, KafkaUnavailableError) or error.cluster in self._done:
            return found
        cluster = self._clusters.get(error.cluster)
        if cluster is not None:
            self._done.add(error.cluster)
            diagnosis = self._diagnose(cluster, self._timeout)
            if diagnosis is not None:
                found.append(diagnosis)
        return found
