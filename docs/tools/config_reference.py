"""Write docs/configuration/reference.md from the code that reads config files.

Which keys exist, their defaults and allowed values come from `ferry.config` (keys.py, model.py,
loader.py) and `ferry.engine.copy.client_settings`; only the prose (what a key does, its
MirrorMaker 2 equivalent) lives here. A key the code knows and this file does not describe, or
the other way round, stops the build: `make docs` runs this before building the site.

    .venv/bin/python docs/tools/config_reference.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ferry.config import keys as K
from ferry.config import loader
from ferry.config.model import SAFE_CONSUMER, SAFE_PRODUCER, ApiConfig, FerryConfig, FlowConfig
from ferry.engine.copy.client_settings import (
    CONSUMER_DEFAULTS,
    PRODUCER_DEFAULTS,
    TRANSACTIONAL_PRODUCER_DEFAULTS,
)

OUT = Path(__file__).resolve().parents[1] / "configuration" / "reference.md"
SAME = "same key, same default"

# key -> (MirrorMaker 2 equivalent, what it does). Defaults and allowed values come from the code.
FLOW_DOCS: dict[str, tuple[str, str]] = {
    "enabled": (
        "`A->B.enabled`",
        "per flow only (`A->B.enabled`): replicate from A to B. Every ordered pair of clusters "
        "is a flow; none is enabled unless set",
    ),
    "topics": (
        SAME,
        "source topics to copy: whole-name regexes; internal topics (`__*`, `.*`, `*.internal`, "
        "`*-internal`) never, as in MM2",
    ),
    "topics.exclude": (SAME, "source topics never copied, whatever `topics` says"),
    "topics.blacklist": ("MM2's deprecated name of `topics.exclude`", "as `topics.exclude`"),
    "groups": (SAME, "source consumer groups to checkpoint (and sync, and fail over)"),
    "groups.exclude": (SAME, "groups never checkpointed"),
    "groups.blacklist": ("MM2's deprecated name of `groups.exclude`", "as `groups.exclude`"),
    "refresh.topics.enabled": (SAME, "look for new topics and partitions while running"),
    "refresh.topics.interval.seconds": (
        SAME,
        "how often: a new topic or partition is copied within this interval (running leases "
        "end early for it)",
    ),
    "sync.topic.configs.enabled": (SAME, "set the source topics' settings on the remote topics"),
    "sync.topic.configs.interval.seconds": (SAME, "how often"),
    "sync.topic.acls.enabled": (SAME, "create the source topics' literal ACLs for remote topics"),
    "sync.topic.acls.interval.seconds": (SAME, "how often"),
    "emit.checkpoints.enabled": (SAME, "write MM2 checkpoints of the source's groups"),
    "emit.checkpoints.interval.seconds": (
        SAME,
        "how often; a failover from checkpoints (source lost) is as fresh as this",
    ),
    "sync.group.offsets.enabled": (
        SAME,
        "commit the checkpointed offsets in the target for groups with no active members there",
    ),
    "sync.group.offsets.interval.seconds": (
        SAME,
        "how often; also `ferry monitor`'s sampling period",
    ),
    "emit.heartbeats.enabled": (SAME, "write MM2 heartbeats to the source's `heartbeats` topic"),
    "emit.heartbeats.interval.seconds": (SAME, "how often"),
    "config.properties.exclude": (SAME, "topic settings never synced to remote topics"),
    "config.properties.blacklist": (
        "MM2's deprecated name of `config.properties.exclude`",
        "as `config.properties.exclude`",
    ),
    "exactly.once.source.support": (
        "same key (a Connect worker setting in MM2; here per flow too)",
        "`enabled`: every copy lands exactly once for read_committed consumers "
        "([exactly-once mode](../operations/guarantees.md#exactly-once-mode)); "
        "`preparing` acts as `disabled`",
    ),
    "sync.schemas.enabled": (
        "none (MM2 copies schema ids unchanged)",
        "where both clusters name a schema registry (`<alias>.schema.registry.url`): register "
        "every schema a copied record uses on the target, before the record, and rewrite the "
        "record's schema id to the target's ([Schema registries](../schema-registries.md)); "
        "acts only when both ends name a registry",
    ),
    "protect.remote.topics": (
        "none (MM2 leaves remote topics writable by anyone allowed to write there)",
        "where the target has an ACL authorizer and a prefix or rename policy: each principal "
        "allowed to write a remote topic, ferry's own excepted, gets a DENY WRITE on it (checked "
        "every 10 s), until `ferry failover` or `ferry switchover` lifts it "
        "([protected remote topics](../security.md#protected-remote-topics))",
    ),
    "source.read.only": (
        "none (MM2 writes nothing to the source with `emit.heartbeats.enabled = false` and "
        "`offset-syncs.topic.location = target`)",
        "`true`: ferry writes nothing at all to the flow's source (heartbeats off; a setting "
        "that would write there, another flow copying into it, or the API's changes kept "
        "there is refused at load; `ferry switchover` refuses). The source principal needs "
        "only READ, DESCRIBE and DESCRIBE_CONFIGS "
        "([read-only source](../security.md#a-read-only-source))",
    ),
    "replication.factor": (SAME, "replication factor of the remote topics ferry creates"),
    "heartbeats.topic.replication.factor": (SAME, "of `heartbeats`; 1 on single-broker clusters"),
    "checkpoints.topic.replication.factor": (
        SAME,
        "of `<source>.checkpoints.internal`; 1 on single-broker clusters",
    ),
    "offset-syncs.topic.replication.factor": (
        "same key (MM2's offset-syncs topic)",
        "of ferry's offset runs topic, `ferry-offset-runs.<source>.internal`",
    ),
    "monitor.min.delay.latest.offset": (
        "none",
        "`ferry monitor`: growth of a source partition in one period below which no sync-delay "
        "alert is raised",
    ),
    "monitor.min.delay.consume.offset": (
        "none",
        "the same for a synced group's committed offsets",
    ),
    "audit.interval.seconds": (
        "none",
        "`ferry monitor` audits the flow this often, in buckets this wide; unset: never "
        "([continuous audit](../audit.md#continuous-audit))",
    ),
    "ferry.batch.max.records": (
        "none",
        "most records in one bounded micro-batch (`--once`, `ferry.lease.seconds = 0`), shared "
        "among lagging partitions in proportion to their lag",
    ),
    "ferry.batch.max.bytes": (
        "none",
        "most estimated bytes in one micro-batch; each batch pays Spark's fixed cost (about "
        "200 ms here: planning, task launch, commit) and at its end a flush and a new fetch of "
        "every partition (2,000,000 x 1 KiB records took about 3.5 s less in 2 batches than "
        "in 8), so a backlog goes fastest in big batches; exactly-once commits each "
        "task's share in one transaction, which must finish within 60 s",
    ),
    "ferry.bins": (
        "none: MM2's `tasks.max` does this job there, but an MM2 file's `tasks.max` is "
        "accepted and ignored, never read as `ferry.bins`",
        "Spark tasks per lease or batch. **0**: in a lease, the flow's share of Spark's task "
        "slots (the cores of live executors divided among the leased flows, counted again "
        "every 2 s); in a bounded micro-batch, one task per 16 MiB of estimated batch bytes, "
        "at least one, at most one per core. **n > 0**: n tasks, but a lease never more than "
        "its share of the slots (a task without a slot would wait a whole lease)",
    ),
    "ferry.trigger.interval.ms": (
        "none",
        "bounded micro-batches: how often a running flow looks for new records",
    ),
    "ferry.copier": (
        "none",
        "the per-task copy loop: `native` (C over librdkafka, about half the CPU per record), "
        "`python`, `auto` = native where it was built and loads; exactly-once always uses the "
        "Python loop",
    ),
    "ferry.lease.seconds": (
        "none",
        "continuous `ferry run`: length of a lease (records arriving during a handover, about "
        "0.75 s, wait for it, so leases are long); 0 = bounded micro-batches, as `--once`",
    ),
    "ferry.head.start.enabled": (
        "none",
        "on a local master the driver copies while Spark starts, until the first task takes "
        "over (nothing copied twice)",
    ),
    "ferry.commit.interval.ms": (
        "Connect's `offset.flush.interval.ms`",
        "how often a leased task commits the flow's position and offset runs; at-least-once, a "
        "crash copies up to this much again; exactly-once, how long each transaction stays open",
    ),
}

POLICY_DOCS: dict[str, tuple[str, str, str]] = {
    "replication.policy.class": (
        "`DefaultReplicationPolicy`",
        SAME,
        "`DefaultReplicationPolicy` (remote topic `A.orders`), `IdentityReplicationPolicy` "
        "(same name, `orders`), or `rename` with `topic.rename.format`",
    ),
    "replication.policy.separator": ("`.`", SAME, "between alias and topic: `A.orders`"),
    "topic.rename.format": (
        "unset",
        "none (MM2 needs a custom policy class)",
        "remote topic names from a template, e.g. `${topic}.replica`; `${source}` is the "
        "source alias",
    ),
}

TOP_DOCS: dict[str, tuple[str, str, str]] = {
    "clusters": ("(required)", "same key", "the cluster aliases: `A, B`"),
    "<alias>.bootstrap.servers": ("(required)", "same key", "`host:port[,host:port...]`"),
    "<alias>.<client key>": (
        "see below",
        "same keys (Java spellings translated)",
        "librdkafka settings for every client of that cluster; `<alias>.consumer.<key>`, "
        "`<alias>.producer.<key>`, `<alias>.admin.<key>` for one role",
    ),
    "security.protocol, sasl.*, ssl.*": (
        "unset",
        SAME,
        "top level: apply to every cluster that does not set its own, as in MM2",
    ),
    "spark.*": (
        "`local[*,4]` when no `spark.master` is set anywhere (4 slots per core, up to 32, "
        "for a source 10 ms or more away)",
        "none",
        "Spark settings, applied over spark-submit's and ferry's own",
    ),
    "ferry.state.dir": (
        "`ferry-state` beside the config file",
        "none",
        "the driver's state: Spark checkpoints, counters, lease files (the flow's position "
        "lives on the target); a relative path starts at the config file's directory",
    ),
    "ferry.once.max.wait.seconds": (
        "",
        "none",
        "how long `ferry run --once` (and other one-shot commands) wait for a cluster that does "
        "not answer before exiting 1 naming it",
    ),
}

API_DOCS: dict[str, tuple[str, str]] = {
    "api.token.file": (
        "none",
        "a file holding the API's bearer token (`FERRY_API_TOKEN` wins when set)",
    ),
    "api.ssl.certfile": ("none", "PEM certificate: the API serves HTTPS only (needs the key)"),
    "api.ssl.keyfile": ("none", "PEM private key of that certificate"),
    "api.control.cluster": (
        "none",
        "alias of the one cluster that keeps every flow's API changes; unset: each flow's "
        "target keeps its own",
    ),
    "api.control.topic": (
        "like Connect's `config.storage.topic`",
        "the compacted topic holding the API's changes, one record per flow; keep a name "
        "ending in `.internal`, so no flow copies it",
    ),
}


def _code(text: object) -> str:
    return f"`{text}`"


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code(str(value).lower())
    if isinstance(value, tuple):
        return ", ".join(_code(item) for item in value) if value else "(empty)"
    return _code(value)


def _allowed(kind: K.Kind) -> str:
    if kind in loader._NUMBER_RULES:
        return loader._NUMBER_RULES[kind][0]
    if kind in loader._CHOICES:
        return ", ".join(_code(c) for c in loader._CHOICES[kind])
    if kind is K.Kind.BOOL:
        return "`true`, `false`"
    return "comma-separated regexes (a YAML list keeps each item whole)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _flow_default(key: str, field: str) -> str:
    flow = FlowConfig(source="A", target="B")
    eos = FlowConfig(source="A", target="B", exactly_once_source_support="enabled")
    if key == "ferry.batch.max.records":
        return f"`{flow.batch_caps[0]}` (exactly-once: `{eos.batch_caps[0]}`)"
    if key == "ferry.batch.max.bytes":
        return f"`{flow.batch_caps[1]}` (exactly-once: `{eos.batch_caps[1]}`)"
    if key == "ferry.commit.interval.ms":
        return (
            f"`{round(flow.commit_interval * 1000)}` "
            f"(exactly-once: `{round(eos.commit_interval * 1000)}`)"
        )
    if field == "policy":
        return ""
    return _default(FlowConfig.model_fields[field].default)


def check() -> list[str]:
    """What the code and this file disagree on."""
    problems = []
    for key in K.FLOW_KEYS.keys() - FLOW_DOCS.keys():
        problems.append(f"flow key {key!r} is not described in {__file__}")
    for key in FLOW_DOCS.keys() - K.FLOW_KEYS.keys():
        problems.append(f"{key!r} is described but is no flow key any more")
    for key in set(K.POLICY_KEYS) ^ POLICY_DOCS.keys():
        problems.append(f"policy key {key!r}: code and {__file__} disagree")
    for key in loader._API_KEYS.keys() ^ API_DOCS.keys():
        problems.append(f"api key {key!r}: code and {__file__} disagree")
    for field in ("state_dir", "once_max_wait_seconds", "spark", "api"):
        if field not in FerryConfig.model_fields:
            problems.append(f"FerryConfig has no field {field!r} any more")
    return problems


def render() -> str:
    out: list[str] = []
    add = out.append
    add("# Configuration reference\n")
    add(
        "<!-- Generated by docs/tools/config_reference.py from src/ferry/config (keys.py, "
        "model.py, loader.py) and src/ferry/engine/copy/client_settings.py; `make docs` "
        "writes it. Edit the generator, not this file. -->\n"
    )
    add(
        "Every key ferry reads, with its default and its MirrorMaker 2 (MM2) equivalent. "
        '"same key, same default" means the key keeps MM2\'s name, meaning and default '
        "(Kafka 4.1.1). How files are written, MM2's Java client keys and secrets are in "
        "[Configuration](index.md).\n"
    )
    add("## Top-level keys\n")
    add("| key | default | MM2 equivalent | what it does |")
    add("|---|---|---|---|")
    defaults = {
        "ferry.once.max.wait.seconds": _code(
            FerryConfig.model_fields["once_max_wait_seconds"].default
        ),
    }
    for key, (default, mm2, what) in TOP_DOCS.items():
        shown = defaults.get(key, default)
        add(f"| `{key}` | {_cell(shown)} | {_cell(mm2)} | {_cell(what)} |")
    add("")
    add("## Flow keys\n")
    add(
        "Each may be set for every flow (`topics = ...`) or for one flow "
        "(`A->B.topics = ...`); the flow's own setting wins. A negative `*.interval.seconds` "
        "turns that task off, as in MM2.\n"
    )
    add("| key | default | allowed | MM2 equivalent | what it does |")
    add("|---|---|---|---|---|")
    for key, (field, kind) in K.FLOW_KEYS.items():
        mm2, what = FLOW_DOCS[key]
        add(
            f"| `{key}` | {_cell(_flow_default(key, field))} | {_cell(_allowed(kind))} "
            f"| {_cell(mm2)} | {_cell(what)} |"
        )
    add("")
    add("## Replication policy keys\n")
    add("Top level or per flow, like the flow keys.\n")
    add("| key | default | MM2 equivalent | what it does |")
    add("|---|---|---|---|")
    for key in K.POLICY_KEYS:
        default, mm2, what = POLICY_DOCS[key]
        add(f"| `{key}` | {_cell(default)} | {_cell(mm2)} | {_cell(what)} |")
    names = ", ".join(_code(name) for name in K.POLICY_CLASSES)
    add(f"\n`replication.policy.class` accepts: {names}.\n")
    add("## Control API keys (`ferry run --api-port`)\n")
    add("Relative paths start at the config file's directory.\n")
    add("| key | default | MM2 equivalent | what it does |")
    add("|---|---|---|---|")
    for key, (field, _is_path) in loader._API_KEYS.items():
        mm2, what = API_DOCS[key]
        default = _default(ApiConfig.model_fields[field].default)
        add(f"| `{key}` | {default} | {_cell(mm2)} | {_cell(what)} |")
    add("")
    add("## Schema registry keys\n")
    add(
        "Per cluster, `<alias>.schema.registry.<key>`: the cluster's schema registry, in "
        "confluent-kafka's `SchemaRegistryClient` names, handed to it unchanged. A flow syncs "
        "schemas when both its clusters name a registry and `sync.schemas.enabled` is true "
        "([Schema registries](../schema-registries.md)). Secret values are masked like every "
        "other secret.\n"
    )
    add("| key | what it is |")
    add("|---|---|")
    for key, what in K.SCHEMA_REGISTRY_KEYS.items():
        add(f"| `<alias>.{K.SCHEMA_REGISTRY_PREFIX}{key}` | {_cell(what)} |")
    add("")
    add("## MM2 keys ferry checks and names as not needed\n")
    add(
        "Their values are checked as MM2 checks them; then `ferry validate` and `ferry run` "
        "name each with the reason.\n"
    )
    add("| key | why ferry does not need it |")
    add("|---|---|")
    for key, (_kind, why) in K.NOT_NEEDED_KEYS.items():
        add(f"| `{key}` | {_cell(why)} |")
    add("")
    add("## Keys accepted and ignored\n")
    add(
        "Kafka Connect's and MM2's own machinery: an MM2 file carrying them loads unchanged, "
        "and `ferry validate` lists them as ignored.\n"
    )
    add("- keys: " + ", ".join(_code(k) for k in sorted(K.IGNORED_KEYS)))
    add("- every key starting with: " + ", ".join(_code(p) for p in K.IGNORED_PREFIXES))
    filters = ", ".join(f"`{k}` (only `{v}`)" for k, v in K.FILTER_CLASS_KEYS.items())
    add(
        f"- MM2's filter classes, when they name the default filter: {filters}; a custom "
        "filter is refused (use `topics`, `groups`, `config.properties.exclude`)"
    )
    add("")
    add("## Client settings\n")
    add(
        "librdkafka's keys, per cluster (`B.producer.linger.ms = 0`). ferry's defaults on the "
        "copy path, each overridable:\n"
    )
    add("| role | key | ferry's default |")
    add("|---|---|---|")
    for key, value in CONSUMER_DEFAULTS.items():
        add(f"| consumer | `{key}` | `{value}` |")
    for key, value in PRODUCER_DEFAULTS.items():
        exactly_once = TRANSACTIONAL_PRODUCER_DEFAULTS[key]
        shown = f"`{value}`" + (
            "" if exactly_once == value else f" (exactly-once: `{exactly_once}`)"
        )
        add(f"| producer | `{key}` | {shown} |")
    add("")
    forced = [f"consumer `{k}={v}`" for k, v in SAFE_CONSUMER.items()]
    forced += [f"producer `{k}={v}`" for k, v in SAFE_PRODUCER.items()]
    add(
        "Always on, and a file that contradicts them is refused (they are what the no-loss "
        "guarantee rests on): " + ", ".join(forced) + ".\n"
    )
    add("Java client keys refused, with the librdkafka setting to use instead:\n")
    add("| Java key | use instead |")
    add("|---|---|")
    for key, instead in K.JAVA_CLIENT_KEYS.items():
        add(f"| `{key}` | {_cell(instead)} |")
    add("")
    add(
        "Java-only client keys, accepted and ignored with a note: "
        + ", ".join(_code(k) for k in sorted(K.JAVA_ONLY_CLIENT_KEYS))
        + ".\n"
    )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args()
    problems = check()
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run make docs", file=sys.stderr)
            return 1
        return 0
    if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
        # Written, and still a failure: a stale page in a commit must not pass `make docs`.
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text, encoding="utf-8")
        print(
            f"{OUT} was out of date and is written now from the code: review and commit it, "
            "then run make docs again",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
