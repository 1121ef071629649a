"""Which keys ferry knows, what they mean and how their values are read (pure tables).

Flow keys keep MirrorMaker 2's names and defaults (Kafka 4.1.1's MirrorConnectorConfig family);
each may be set for every flow (`topics = ...`) or one flow (`A->B.topics = ...`).
"""

from __future__ import annotations

from enum import Enum

__all__ = [
    "FILTER_CLASS_KEYS",
    "FLOW_KEYS",
    "IGNORED_KEYS",
    "IGNORED_PREFIXES",
    "INHERITED_CLIENT_PREFIXES",
    "JAVA_CLIENT_KEYS",
    "JAVA_ONLY_CLIENT_KEYS",
    "POLICY_CLASSES",
    "SCHEMA_REGISTRY_KEYS",
    "SCHEMA_REGISTRY_PREFIX",
    "Kind",
]


class Kind(Enum):
    BOOL = "boolean"
    INT = "integer"
    INTERVAL = "interval"  # seconds; a negative value turns the task off, as in MM2
    REGEX_LIST = "regex list"
    EOS = "exactly-once mode"
    COPIER = "copy loop"
    REPLICATION_FACTOR = "replication factor"
    POSITIVE_INT = "positive integer"
    AUDIT_INTERVAL = "audit interval"
    SYNCS_LOCATION = "offset-syncs topic location"


# key -> (FlowConfig field, kind). `enabled` only makes sense per flow (`A->B.enabled`).
FLOW_KEYS: dict[str, tuple[str, Kind]] = {
    "enabled": ("enabled", Kind.BOOL),
    "topics": ("topics", Kind.REGEX_LIST),
    "topics.exclude": ("topics_exclude", Kind.REGEX_LIST),
    "topics.blacklist": ("topics_exclude", Kind.REGEX_LIST),  # MM2's deprecated name
    "groups": ("groups", Kind.REGEX_LIST),
    "groups.exclude": ("groups_exclude", Kind.REGEX_LIST),
    "groups.blacklist": ("groups_exclude", Kind.REGEX_LIST),
    "refresh.topics.enabled": ("refresh_topics_enabled", Kind.BOOL),
    "refresh.topics.interval.seconds": ("refresh_topics_interval_seconds", Kind.INTERVAL),
    "sync.topic.configs.enabled": ("sync_topic_configs_enabled", Kind.BOOL),
    "sync.topic.configs.interval.seconds": ("sync_topic_configs_interval_seconds", Kind.INTERVAL),
    "sync.topic.acls.enabled": ("sync_topic_acls_enabled", Kind.BOOL),
    "sync.topic.acls.interval.seconds": ("sync_topic_acls_interval_seconds", Kind.INTERVAL),
    "emit.checkpoints.enabled": ("emit_checkpoints_enabled", Kind.BOOL),
    "emit.checkpoints.interval.seconds": ("emit_checkpoints_interval_seconds", Kind.INTERVAL),
    "sync.group.offsets.enabled": ("sync_group_offsets_enabled", Kind.BOOL),
    "sync.group.offsets.interval.seconds": ("sync_group_offsets_interval_seconds", Kind.INTERVAL),
    "emit.heartbeats.enabled": ("emit_heartbeats_enabled", Kind.BOOL),
    "emit.heartbeats.interval.seconds": ("emit_heartbeats_interval_seconds", Kind.INTERVAL),
    "config.properties.exclude": ("config_properties_exclude", Kind.REGEX_LIST),
    "config.properties.blacklist": ("config_properties_exclude", Kind.REGEX_LIST),
    "exactly.once.source.support": ("exactly_once_source_support", Kind.EOS),
    "sync.schemas.enabled": ("sync_schemas_enabled", Kind.BOOL),
    # Only ferry writes the flow's remote topics until a failover (flows/protection.py).
    "protect.remote.topics": ("protect_remote_topics", Kind.BOOL),
    # ferry writes nothing at all to the flow's source cluster (config/read_only.py).
    "source.read.only": ("source_read_only", Kind.BOOL),
    "replication.factor": ("replication_factor", Kind.REPLICATION_FACTOR),
    "heartbeats.topic.replication.factor": (
        "heartbeats_topic_replication_factor",
        Kind.REPLICATION_FACTOR,
    ),
    "checkpoints.topic.replication.factor": (
        "checkpoints_topic_replication_factor",
        Kind.REPLICATION_FACTOR,
    ),
    "offset-syncs.topic.replication.factor": (
        "offset_syncs_topic_replication_factor",
        Kind.REPLICATION_FACTOR,
    ),
    # ferry's own engine settings (no MM2 equivalent): the size of one micro-batch, how many
    # Spark tasks share it (0: one per core), and how often a running flow looks for new data.
    # the sliding-window sync-delay monitor (`ferry monitor`): growth of A below which no alert.
    "monitor.min.delay.latest.offset": ("monitor_min_delay_latest_offset", Kind.INT),
    "monitor.min.delay.consume.offset": ("monitor_min_delay_consume_offset", Kind.INT),
    # `ferry monitor`'s continuous audit: its period and bucket width; unset: no audit.
    "audit.interval.seconds": ("audit_interval_seconds", Kind.AUDIT_INTERVAL),
    "ferry.batch.max.records": ("batch_max_records", Kind.POSITIVE_INT),
    "ferry.batch.max.bytes": ("batch_max_bytes", Kind.POSITIVE_INT),
    "ferry.bins": ("bins", Kind.INT),
    "ferry.trigger.interval.ms": ("trigger_interval_ms", Kind.INT),
    "ferry.copier": ("copier", Kind.COPIER),
    "ferry.lease.seconds": ("lease_seconds", Kind.INT),
    "ferry.head.start.enabled": ("head_start_enabled", Kind.BOOL),
    "ferry.commit.interval.ms": ("commit_interval_ms", Kind.POSITIVE_INT),
}

# `A.schema.registry.<key>`: the cluster's schema registry, in the names confluent-kafka's
# SchemaRegistryClient takes (ferry hands them to it unchanged), with what each is.
SCHEMA_REGISTRY_PREFIX = "schema.registry."
SCHEMA_REGISTRY_KEYS: dict[str, str] = {
    "url": "the registry's Confluent-compatible API, e.g. http://host:8081 (comma-separated: "
    "several, tried in turn)",
    "basic.auth.user.info": "HTTP basic auth, `user:password` (secret)",
    "basic.auth.credentials.source": "`USER_INFO` (the default: basic.auth.user.info)",
    "bearer.auth.credentials.source": "`STATIC_TOKEN` (bearer.auth.token) or `OAUTHBEARER` "
    "(the client credentials below)",
    "bearer.auth.token": "a static bearer token (secret)",
    "bearer.auth.logical.cluster": "the registry's logical cluster (Confluent Cloud)",
    "bearer.auth.identity.pool.id": "the identity pool (Confluent Cloud)",
    "bearer.auth.client.id": "OAuth client id",
    "bearer.auth.client.secret": "OAuth client secret (secret)",
    "bearer.auth.scope": "OAuth scope",
    "bearer.auth.issuer.endpoint.url": "OAuth token endpoint",
    "ssl.ca.location": "CA certificate file (or directory) the registry's certificate is "
    "checked against",
    "ssl.certificate.location": "client certificate (mutual TLS)",
    "ssl.key.location": "client key (mutual TLS)",
    "ssl.key.password": "the client key's password (secret)",
    "timeout": "seconds an HTTP request may take",
}

POLICY_KEYS = ("replication.policy.class", "replication.policy.separator", "topic.rename.format")

# replication.policy.class values ferry implements, by every name a file may use.
POLICY_CLASSES: dict[str, str] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "prefix",
    "DefaultReplicationPolicy": "prefix",
    "default": "prefix",
    "prefix": "prefix",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
    "IdentityReplicationPolicy": "identity",
    "identity": "identity",
    "rename": "rename",
}

# MM2's pluggable filters: ferry implements the default ones (regex lists) and nothing else.
FILTER_CLASS_KEYS: dict[str, str] = {
    "topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
    "group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
    "config.property.filter.class": "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
}

# MM2 flow settings whose job ferry does otherwise: checked like MM2 checks them, then named at
# load with the reason, so nobody believes they changed something.
NOT_NEEDED_KEYS: dict[str, tuple[Kind, str]] = {
    "offset.lag.max": (
        Kind.INT,
        "ferry records the target offset of every copied record, so offset translation is exact "
        "and has no lag to bound",
    ),
    "refresh.groups.enabled": (
        Kind.BOOL,
        "ferry lists the source's consumer groups at every checkpoint "
        "(emit.checkpoints.interval.seconds), so new groups are always found",
    ),
    "refresh.groups.interval.seconds": (
        Kind.INTERVAL,
        "ferry lists the source's consumer groups at every checkpoint "
        "(emit.checkpoints.interval.seconds), so new groups are always found",
    ),
    "offset-syncs.topic.location": (
        Kind.SYNCS_LOCATION,
        "ferry keeps its offset syncs (the exact offset runs, ferry-offset-runs.<source>.internal) "
        "on the target, always, so it writes none to the source",
    ),
}

# Keys that configure Kafka Connect or MM2's own machinery; ferry has no equivalent to set, so
# MM2 files that carry them load unchanged and `ferry validate` lists them as ignored.
IGNORED_KEYS = frozenset(
    {
        "tasks.max",
        "dedicated.mode.enable.internal.rest",
        "emit.offset-syncs.enabled",
        "consumer.poll.timeout.ms",
        "admin.timeout.duration.ms",
        "add.source.alias.to.metrics",
        "metric.reporters",
        "replication.policy.internal.topic.separator.enabled",
        "sync.topic.acls.filter.class",
        "forwarding.admin.class",
        "plugin.path",
        "group.id",
    }
)
IGNORED_PREFIXES = (
    "key.converter",
    "value.converter",
    "header.converter",
    "offset.storage.",
    "config.storage.",
    "status.storage.",
    "offset.flush.",
    "listeners",
    "rest.",
    "admin.listeners",
    "producer.override.",
    "consumer.override.",
    "admin.override.",
    "connector.client.config.override.policy",
    "exactly.once.support",
)

# Top-level client settings MM2 copies into every cluster (MirrorClientConfig's security keys).
INHERITED_CLIENT_PREFIXES = ("security.protocol", "sasl.", "ssl.")

# Java client keys librdkafka spells differently or does not have, with what to use instead.
# (Trust and key stores are translated: config/java_stores.py.)
JAVA_CLIENT_KEYS: dict[str, str] = {
    "ssl.enabled.protocols": "nothing: librdkafka negotiates TLS 1.2 or newer",
    "ssl.protocol": "nothing: librdkafka negotiates TLS 1.2 or newer",
    "ssl.trustmanager.algorithm": "ssl.ca.location",
    "ssl.keymanager.algorithm": "ssl.keystore.location",
    "sasl.client.callback.handler.class": "sasl.username/sasl.password or sasl.oauthbearer.*",
    "sasl.login.callback.handler.class": "sasl.oauthbearer.method=oidc with sasl.oauthbearer.*",
    "sasl.login.class": "sasl.mechanism with librdkafka's built-in logins",
}

# Java client keys with no meaning for ferry's librdkafka clients; ignored with a note.
JAVA_ONLY_CLIENT_KEYS = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "buffer.memory",
        "interceptor.classes",
        "default.api.timeout.ms",
        "auto.include.jmx.reporter",
        "metrics.recording.level",
        "metrics.num.samples",
        "metrics.sample.window.ms",
        "partitioner.class",
        "exclude.internal.topics",
    }
)
