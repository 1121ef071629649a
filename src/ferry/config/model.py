"""The typed configuration every ferry command works from (frozen pydantic models).

Files never reach code directly: `ferry.config.load_config` turns a YAML or MM2 `.properties`
file into these models, so the rest of ferry sees one shape whatever the user wrote.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ferry.policy import ReplicationPolicy, policy_for

MIB = 1024 * 1024
GIB = 1024 * MIB

__all__ = [
    "ONCE_MAX_WAIT_SECONDS",
    "ApiConfig",
    "ClusterConfig",
    "FerryConfig",
    "FlowConfig",
    "PolicySpec",
]

# Settings ferry forces on its replication clients; the loader refuses files that contradict
# them (UnsafeConfigError), so these are never silently overridden either way.
SAFE_CONSUMER = {"enable.auto.commit": "false", "isolation.level": "read_committed"}
SAFE_PRODUCER = {"acks": "all", "enable.idempotence": "true"}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClusterConfig(_Frozen):
    """One Kafka cluster: its alias and the librdkafka settings for each client role."""

    alias: str
    bootstrap_servers: str
    common: dict[str, str] = Field(default_factory=dict)
    consumer: dict[str, str] = Field(default_factory=dict)
    producer: dict[str, str] = Field(default_factory=dict)
    admin: dict[str, str] = Field(default_factory=dict)
    # The cluster's schema registry (`A.schema.registry.*`), in confluent-kafka's
    # `SchemaRegistryClient` names (`url`, `basic.auth.user.info`, `ssl.ca.location`, ...);
    # empty: none. A flow syncs schemas when both its ends name one (sync.schemas.enabled).
    schema_registry: dict[str, str] = Field(default_factory=dict)

    def _merged(self, role: dict[str, str]) -> dict[str, str]:
        return {**self.common, **role, "bootstrap.servers": self.bootstrap_servers}

    def consumer_config(self) -> dict[str, str]:
        """librdkafka consumer settings; auto commit off and read_committed, always."""
        return {**self._merged(self.consumer), **SAFE_CONSUMER}

    def producer_config(self) -> dict[str, str]:
        """librdkafka producer settings; acks=all and idempotence, always."""
        return {**self._merged(self.producer), **SAFE_PRODUCER}

    def admin_config(self) -> dict[str, str]:
        return self._merged(self.admin)


class PolicySpec(_Frozen):
    """Which replication policy names a flow's remote topics (see ferry.policy.policy_for)."""

    kind: Literal["prefix", "identity", "rename"] = "prefix"
    separator: str = "."
    rename_format: str | None = None


ONCE_MAX_WAIT_SECONDS = 120


class FlowConfig(_Frozen):
    """One direction of replication, `source->target`, with MM2's settings resolved."""

    source: str
    target: str
    enabled: bool = False
    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = (r"mm2.*\.internal", r".*\.replica", "__.*")
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")
    policy: PolicySpec = PolicySpec()
    refresh_topics_enabled: bool = True
    refresh_topics_interval_seconds: int = 600
    sync_topic_configs_enabled: bool = True
    sync_topic_configs_interval_seconds: int = 600
    sync_topic_acls_enabled: bool = True
    sync_topic_acls_interval_seconds: int = 600
    emit_checkpoints_enabled: bool = True
    emit_checkpoints_interval_seconds: int = 60
    sync_group_offsets_enabled: bool = False
    sync_group_offsets_interval_seconds: int = 60
    emit_heartbeats_enabled: bool = True
    emit_heartbeats_interval_seconds: int = 1
    config_properties_exclude: tuple[str, ...] = (
        "follower\\.replication\\.throttled\\.replicas",
        "leader\\.replication\\.throttled\\.replicas",
        "message\\.timestamp\\.difference\\.max\\.ms",
        "message\\.timestamp\\.type",
        "unclean\\.leader\\.election\\.enable",
        "min\\.insync\\.replicas",
    )
    exactly_once_source_support: Literal["disabled", "preparing", "enabled"] = "disabled"
    replication_factor: int = 2
    heartbeats_topic_replication_factor: int = 3
    checkpoints_topic_replication_factor: int = 3
    offset_syncs_topic_replication_factor: int = 3
    # Schemas follow the data (docs/schema-registries.md): where both ends name a schema
    # registry, every schema a copied record uses is registered on the target and the
    # record's schema id rewritten to the target's. Acts only when both registries are set.
    sync_schemas_enabled: bool = True
    # `A->B.protect.remote.topics`: where the target has an authorizer, a DENY WRITE on each
    # remote topic for every principal but ferry's, until a failover or switchover lifts it.
    protect_remote_topics: bool = True
    # `A->B.source.read.only`: ferry writes nothing to A (no heartbeats, topics, control
    # records or ACLs); settings that would are refused at load (config/read_only.py).
    source_read_only: bool = False
    monitor_min_delay_latest_offset: int = 0
    monitor_min_delay_consume_offset: int = 0
    # `ferry monitor` audits the flow every this many seconds (and buckets records by it);
    # None: never (the audit is a Spark job reading both clusters' topics).
    audit_interval_seconds: int | None = Field(default=None, ge=1)
    # None: the mode's default (batch_caps). Bigger batches pay Spark's per-batch cost
    # (planning, task launch, commit, refetching at range ends) less often: 2,000,000 x 1 KiB
    # took 2 batches instead of 8 and about 3.5 s and 2 CPU s less (bench.cpu_breakdown).
    batch_max_records: int | None = None
    batch_max_bytes: int | None = None
    # Spark tasks per lease or batch; 0: a lease takes the flow's share of the task slots, a
    # batch one per 16 MiB up to one per core (engine/plan/batches.py: lease_bins, bin_count).
    bins: int = 0
    trigger_interval_ms: int = 200
    # The per-task copy loop: "native" (C over librdkafka, engine/copy/native/fastcopy.c),
    # "python" (engine/copy/python_loop.py), "auto": native where it loads, else python.
    copier: Literal["auto", "native", "python"] = "auto"
    # Continuous copy: each Spark micro-batch is a lease of this many seconds, in which every
    # task copies its partitions continuously; 0: bounded micro-batches (what --once runs).
    # Long, because records arriving during a handover between leases wait for it (about
    # 0.75 s measured at 5,000 records/s): once every 10 minutes keeps that out of p99.
    lease_seconds: int = Field(default=600, ge=0)
    # Continuous copy on a local master: the driver copies the flow while Spark starts, until
    # the first leased task takes over (engine/head_start.py), so a start or restart does not
    # add Spark's start-up to the recovery point.
    head_start_enabled: bool = True
    # How often a leased task commits what the target acknowledged (the flow's position and
    # its offset runs); in exactly-once mode, how long each transaction stays open. None: 25
    # ms in exactly-once mode (a transaction's records are visible only once it commits; with
    # one transaction per task a slice costs the coordinators a few requests, and at 5,000
    # records/s into 8 partitions 25 ms measured p99 80 ms at a read_committed consumer
    # against 354 at 100 ms, for 0.40 of a core against 0.31), 1000 ms otherwise
    # (at-least-once: a crash copies up to this much traffic again).
    commit_interval_ms: int | None = None

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def replication_policy(self) -> ReplicationPolicy:
        """The flow's replication policy (remote topic names, internal topics), built once per
        policy and source: every part of ferry names the flow's topics through one object."""
        return _policy(self.policy, self.source)

    @property
    def progress_group(self) -> str:
        """The group on the target whose offsets of the remote partitions are this flow's
        position (the next source offset), committed only after the target acknowledged."""
        return f"ferry-{self.source}-to-{self.target}"

    @property
    def exactly_once(self) -> bool:
        return self.exactly_once_source_support == "enabled"

    @property
    def leased(self) -> bool:
        return self.lease_seconds > 0

    @property
    def commit_interval(self) -> float:
        """Seconds between a leased task's commits (see commit_interval_ms)."""
        default = 25 if self.exactly_once else 1000
        return (self.commit_interval_ms or default) / 1000

    @property
    def batch_caps(self) -> tuple[int, int]:
        """(most records, most estimated bytes) of one micro-batch.

        Exactly-once copies each partition of a batch in one transaction, which must commit
        within the transaction timeout (60 s) even on a slow link: smaller batches there."""
        records, size = (1_000_000, 256 * MIB) if self.exactly_once else (4_000_000, GIB)
        return (self.batch_max_records or records, self.batch_max_bytes or size)


DEFAULT_CONTROL_TOPIC = "ferry-control.internal"


class ApiConfig(_Frozen):
    """`ferry run --api-port`: who may call it, over what, and where its changes are kept."""

    token_file: Path | None = None  # `api.token.file`; FERRY_API_TOKEN wins when set
    ssl_certfile: Path | None = None  # `api.ssl.certfile` + `api.ssl.keyfile`: HTTPS
    ssl_keyfile: Path | None = None
    control_cluster: str | None = None  # `api.control.cluster`: every flow's control topic there
    control_topic: str = DEFAULT_CONTROL_TOPIC  # `api.control.topic`


class FerryConfig(_Frozen):
    """A whole config file: clusters, every flow between them, Spark settings, state dir."""

    path: Path | None = None
    clusters: dict[str, ClusterConfig]
    flows: tuple[FlowConfig, ...] = ()
    spark: dict[str, str] = Field(default_factory=dict)
    state_dir: Path = Path("ferry-state")
    # `--once` runs give up on a cluster that has not answered for this long (cron must end).
    once_max_wait_seconds: int = ONCE_MAX_WAIT_SECONDS
    api: ApiConfig = ApiConfig()
    ignored_keys: tuple[str, ...] = ()
    # One sentence per MM2 setting that has no job in ferry: which key, and why.
    notes: tuple[str, ...] = ()
    # Every secret setting (ferry.secrets.is_secret_key), with the config provider references
    # its value came from; none: it is written in the file itself. The values are masked.
    secrets: dict[str, tuple[str, ...]] = Field(default_factory=dict)

    @property
    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        return tuple(flow for flow in self.flows if flow.enabled)

    @property
    def read_only_clusters(self) -> frozenset[str]:
        """Clusters an enabled flow declares its read-only source: ferry writes nothing there."""
        return frozenset(f.source for f in self.enabled_flows if f.source_read_only)

    def syncs_schemas(self, flow: FlowConfig) -> bool:
        """Whether `flow` registers schemas on its target and translates schema ids: on
        (sync.schemas.enabled) and both its clusters name a schema registry."""
        return (
            flow.sync_schemas_enabled
            and bool(self.clusters[flow.source].schema_registry)
            and bool(self.clusters[flow.target].schema_registry)
        )

    def flow(self, source: str, target: str) -> FlowConfig:
        """The flow `source->target`; every ordered pair of clusters has one (maybe disabled)."""
        for candidate in self.flows:
            if candidate.source == source and candidate.target == target:
                return candidate
        raise KeyError(f"{source}->{target}")


@cache
def _policy(spec: PolicySpec, source: str) -> ReplicationPolicy:
    return policy_for(spec, source)
