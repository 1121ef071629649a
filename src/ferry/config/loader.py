"""Entries (from either file format) to a FerryConfig, with MM2's meaning and defaults.

Key resolution, in order: `clusters`; `spark.*`; `ferry.state.dir` and
`ferry.once.max.wait.seconds`; `api.*` (ferry run's control API); `<src>-><dst>.<flow key>`;
`<alias>.<client key>` (with
`consumer.`/`producer.`/`admin.` roles); top-level flow keys (defaults for every flow);
top-level security keys (inherited by every cluster); keys MM2 or Kafka Connect need and ferry
does not (collected as ignored). Anything else is an error with a "did you mean". Every error
names the file, line, key, bad value and what is allowed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

from ferry.config import read_only
from ferry.config.client_keys import check_client_key, check_safety, translate_jaas
from ferry.config.entries import Entry, read_entries
from ferry.config.java_stores import STORE_KEYS, translate_stores
from ferry.config.keys import (
    FILTER_CLASS_KEYS,
    FLOW_KEYS,
    IGNORED_KEYS,
    IGNORED_PREFIXES,
    INHERITED_CLIENT_PREFIXES,
    NOT_NEEDED_KEYS,
    POLICY_CLASSES,
    POLICY_KEYS,
    SCHEMA_REGISTRY_KEYS,
    SCHEMA_REGISTRY_PREFIX,
    Kind,
)
from ferry.config.model import (
    ONCE_MAX_WAIT_SECONDS,
    ApiConfig,
    ClusterConfig,
    FerryConfig,
    FlowConfig,
    PolicySpec,
)
from ferry.config.providers import ProviderError, declared_providers
from ferry.errors import ConfigError, UnsafeConfigError
from ferry.policy import policy_for
from ferry.secrets import is_secret_key, register

__all__ = ["load_config", "parse_entries"]

_ALIAS = re.compile(r"[A-Za-z0-9_-]+")
_FLOW_PREFIX = re.compile(r"^(?P<source>[^.\s]+?)->(?P<target>[^.\s]+)\.(?P<rest>.+)$")
_ROLES = ("consumer", "producer", "admin")
# Whole-number kinds: what is allowed (for the error message) and the test.
_NUMBER_RULES: dict[Kind, tuple[str, Callable[[int], bool]]] = {
    Kind.INT: ("a whole number, 0 or more", lambda n: n >= 0),
    Kind.POSITIVE_INT: ("a whole number, 1 or more", lambda n: n >= 1),
    Kind.AUDIT_INTERVAL: (
        "whole seconds, 1 or more (how often `ferry monitor` audits the flow); leave the key "
        "out for no continuous audit",
        lambda n: n >= 1,
    ),
    Kind.INTERVAL: ("whole seconds; a negative number turns the task off", lambda n: True),
    Kind.REPLICATION_FACTOR: (
        "a whole number, 1 or more, or -1 for the broker default",
        lambda n: n >= 1 or n == -1,
    ),
}
_EOS_MODES = ("disabled", "preparing", "enabled")
# Keys whose value is one word of a fixed list.
_CHOICES: dict[Kind, tuple[str, ...]] = {
    Kind.EOS: _EOS_MODES,
    Kind.COPIER: ("auto", "native", "python"),
    Kind.SYNCS_LOCATION: ("source", "target"),
}
# First words of ferry's and MM2's own keys; an alias equal to one would make keys ambiguous.
_RESERVED_ALIASES = frozenset(
    key.split(".", 1)[0]
    for key in (
        *FLOW_KEYS,
        *POLICY_KEYS,
        *FILTER_CLASS_KEYS,
        *IGNORED_KEYS,
        *INHERITED_CLIENT_PREFIXES,
        "spark.",
        "ferry.",
        "api.",
        "clusters",
    )
)
# `api.*` keys: ApiConfig field, and whether the value is a file path (relative to the file).
_API_KEYS: dict[str, tuple[str, bool]] = {
    "api.token.file": ("token_file", True),
    "api.ssl.certfile": ("ssl_certfile", True),
    "api.ssl.keyfile": ("ssl_keyfile", True),
    "api.control.cluster": ("control_cluster", False),
    "api.control.topic": ("control_topic", False),
}


def load_config(path: str | Path) -> FerryConfig:
    """Read a `ferry.yaml` or MM2 `.properties` file; raise ConfigError on anything wrong."""
    path = Path(path)
    return parse_entries(read_entries(path), file=str(path), base_dir=path.resolve().parent)


def parse_entries(
    entries: Iterable[Entry], *, file: str | None = None, base_dir: Path | None = None
) -> FerryConfig:
    """Build the model from flat entries; `base_dir` anchors relative paths (the file's dir)."""
    return _Builder(list(entries), file, base_dir or Path.cwd()).build()


class _Builder:
    def __init__(self, entries: list[Entry], file: str | None, base_dir: Path) -> None:
        self.file = file
        self.base_dir = base_dir
        self.entries: dict[str, Entry] = {}
        for entry in entries:
            key = entry.key.strip()
            earlier = self.entries.get(key)
            if earlier is not None:
                raise self.error(
                    entry._replace(key=key),
                    f"is set twice (lines {earlier.line} and {entry.line}); keep one",
                )
            self.entries[key] = entry._replace(key=key, value=entry.value.strip())
        self.ignored: list[str] = []
        self.notes: list[str] = []
        # Topics a `topics` entry names exactly that the policy calls internal: (entry key,
        # line, topic, why) -> the enabled flows that will not copy them.
        self.internal_named: dict[tuple[str, int, str, str], list[str]] = {}
        # Secret settings: key -> the provider references its value came from (none: the file).
        self.secrets: dict[str, tuple[str, ...]] = {}
        self.resolve_references()

    # --- config providers and secrets -----------------------------------------------------

    def resolve_references(self) -> None:
        """Replace every ${provider:...} reference by its value, and register each secret
        value (see ferry.secrets) before anything could print it."""
        providers = declared_providers(self.entries, self.base_dir, self.error)
        for key, entry in list(self.entries.items()):
            try:
                value, refs = providers.resolve(entry.value)
                items = entry.items
                if items is not None:
                    items = tuple(providers.resolve(item)[0] for item in items)
            except ProviderError as exc:
                raise self.error(entry, str(exc)) from None
            if is_secret_key(key):
                register(value)
                self.secrets[key] = tuple(ref.text for ref in refs)
            self.entries[key] = entry._replace(value=value, items=items)

    # --- errors ---------------------------------------------------------------------------

    def error(self, entry: Entry, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, key=entry.key, line=entry.line)

    def failer(self, entry: Entry) -> Callable[[str], ConfigError]:
        return lambda message: self.error(entry, message)

    # --- the whole file -------------------------------------------------------------------

    def build(self) -> FerryConfig:
        aliases = self.aliases()
        spark: dict[str, str] = {}
        state_dir = self.base_dir / "ferry-state"
        once_max_wait: Any = ONCE_MAX_WAIT_SECONDS
        flow_defaults: dict[str, Entry] = {}
        per_flow: dict[tuple[str, str], dict[str, Entry]] = {}
        per_cluster: dict[str, list[tuple[str, Entry]]] = {alias: [] for alias in aliases}
        inherited: list[Entry] = []
        api: dict[str, Any] = {}

        for key, entry in self.entries.items():
            first = key.split(".", 1)[0]
            flow_match = _FLOW_PREFIX.match(key)
            if key == "clusters":
                continue
            if key.startswith("spark."):
                spark[key] = entry.value
            elif key == "ferry.once.max.wait.seconds":
                once_max_wait = self.value(entry, Kind.POSITIVE_INT)
            elif key == "ferry.state.dir":
                if not entry.value:
                    raise self.error(entry, "is empty; give a directory for Spark checkpoints")
                state_dir = self.base_dir / Path(entry.value).expanduser()
            elif key in _API_KEYS:
                field, is_path = _API_KEYS[key]
                if not entry.value:
                    raise self.error(entry, "is empty")
                value = entry.value
                api[field] = self.base_dir / Path(value).expanduser() if is_path else value
            elif flow_match is not None:
                source, target = flow_match["source"], flow_match["target"]
                for alias in (source, target):
                    if alias not in aliases:
                        raise self.error(entry, self.unknown_alias(alias, aliases))
                if source == target:
                    raise self.error(entry, f"a flow cannot go from {source} to itself")
                rest = flow_match["rest"]
                if self.is_ignored(entry, rest):
                    continue
                if rest not in FLOW_KEYS and rest not in POLICY_KEYS:
                    raise self.error(entry, self.unknown_key(rest, FLOW_KEYS.keys() | POLICY_KEYS))
                per_flow.setdefault((source, target), {})[rest] = entry
            elif first in aliases:
                per_cluster[first].append((key[len(first) + 1 :], entry))
            elif (key in FLOW_KEYS and key != "enabled") or key in POLICY_KEYS:
                flow_defaults[key] = entry
            elif key.startswith(INHERITED_CLIENT_PREFIXES):
                inherited.append(entry)
            elif self.is_ignored(entry, key):
                continue
            else:
                raise self.error(entry, self.unknown_top_level(key, aliases))

        clusters = {alias: self.cluster(alias, per_cluster[alias], inherited) for alias in aliases}
        self.check_api(api, aliases)
        flows = tuple(
            self.flow(source, target, flow_defaults, per_flow.get((source, target), {}))
            for source in aliases
            for target in aliases
            if source != target
        )
        self.note_internal_topics()
        refused = read_only.conflict(flows, self.entries, per_flow, flow_defaults)
        if refused is not None:
            raise self.error(*refused)
        self.note_copied_control_topic(ApiConfig(**api), flows)
        self.check_schema_copier(clusters, flows, per_flow, flow_defaults)
        return FerryConfig(
            path=Path(self.file) if self.file else None,
            clusters=clusters,
            flows=flows,
            spark=spark,
            state_dir=state_dir,
            once_max_wait_seconds=once_max_wait,
            api=ApiConfig(**api),
            ignored_keys=tuple(self.ignored),
            notes=tuple(self.notes),
            secrets=self.secrets,
        )

    def note_copied_control_topic(self, api: ApiConfig, flows: tuple[FlowConfig, ...]) -> None:
        """The control topic lives on `api.control.cluster`, or else on every flow's target;
        a flow out of such a cluster would copy it when its name is not internal."""
        enabled = [f for f in flows if f.enabled]
        places = {api.control_cluster} if api.control_cluster else {f.target for f in enabled}
        topic = api.control_topic
        for flow in enabled:
            if flow.source not in places or policy_for(flow.policy).is_internal_topic(topic):
                continue
            listed = any(re.fullmatch(p, topic) for p in flow.topics) and not any(
                re.fullmatch(p, topic) for p in flow.topics_exclude
            )
            if listed:
                self.notes.append(
                    f"flow {flow.name} would copy the control topic '{topic}' from "
                    f"{flow.source}: give api.control.topic a name ending in '.internal' "
                    "(internal topics are never replicated), or exclude it in topics.exclude"
                )

    def check_schema_copier(
        self,
        clusters: dict[str, ClusterConfig],
        flows: tuple[FlowConfig, ...],
        per_flow: dict[tuple[str, str], dict[str, Entry]],
        defaults: dict[str, Entry],
    ) -> None:
        """Schema ids are rewritten by the Python copy loop only; `ferry.copier = native` on a
        flow that syncs schemas would copy ids the target's consumers cannot read."""
        for flow in flows:
            syncs = (
                flow.sync_schemas_enabled
                and clusters[flow.source].schema_registry
                and clusters[flow.target].schema_registry
            )
            if flow.enabled and syncs and flow.copier == "native":
                own = per_flow.get((flow.source, flow.target), {})
                entry = own.get("ferry.copier") or defaults["ferry.copier"]
                raise self.error(
                    entry,
                    f"flow {flow.name} syncs schemas (both clusters name a schema registry), "
                    "and schema ids are rewritten by the Python copy loop only: set "
                    f"ferry.copier = auto (or python), or {flow.name}.sync.schemas.enabled = "
                    "false",
                )

    def check_api(self, api: dict[str, Any], aliases: list[str]) -> None:
        cluster = api.get("control_cluster")
        if cluster is not None and cluster not in aliases:
            raise self.error(
                self.entries["api.control.cluster"], self.unknown_alias(cluster, aliases)
            )
        certfile, keyfile = ("ssl_certfile" in api), ("ssl_keyfile" in api)
        if certfile != keyfile:
            given = "api.ssl.certfile" if certfile else "api.ssl.keyfile"
            other = "api.ssl.keyfile" if certfile else "api.ssl.certfile"
            raise self.error(self.entries[given], f"needs {other} too (HTTPS takes both)")

    def aliases(self) -> list[str]:
        entry = self.entries.get("clusters")
        if entry is None:
            raise ConfigError(
                "has no 'clusters' key; list the cluster aliases, e.g. 'clusters = A, B'",
                file=self.file,
            )
        aliases = list(_list_items(entry))
        if not aliases:
            raise self.error(entry, "is empty; list the cluster aliases, e.g. 'A, B'")
        seen: set[str] = set()
        for alias in aliases:
            if not _ALIAS.fullmatch(alias):
                raise self.error(
                    entry,
                    f"alias '{alias}' is not allowed; use letters, digits, '_' and '-' only",
                )
            if alias in _RESERVED_ALIASES:
                raise self.error(entry, f"alias '{alias}' clashes with ferry's own keys")
            if alias in seen:
                raise self.error(entry, f"alias '{alias}' is listed twice")
            seen.add(alias)
        return aliases

    def is_ignored(self, entry: Entry, key: str) -> bool:
        if key in FILTER_CLASS_KEYS:
            default = FILTER_CLASS_KEYS[key]
            if entry.value not in (default, default.rsplit(".", 1)[-1]):
                raise self.error(
                    entry,
                    f"'{entry.value}' is a custom MirrorMaker filter, which ferry cannot run; "
                    f"allowed: {default}. Use topics/groups/config.properties.exclude instead",
                )
            self.ignored.append(entry.key)
            return True
        if key in NOT_NEEDED_KEYS:
            kind, why = NOT_NEEDED_KEYS[key]
            self.value(entry, kind)  # a bad value is still an error, as in MM2
            self.notes.append(f"key '{entry.key}': {why}; not needed")
            return True
        if key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES):
            self.ignored.append(entry.key)
            return True
        return False

    # --- unknown keys ---------------------------------------------------------------------

    @staticmethod
    def unknown_alias(alias: str, aliases: list[str]) -> str:
        return f"names cluster '{alias}', which is not in clusters ({', '.join(aliases)})"

    @staticmethod
    def unknown_key(key: str, known: Iterable[str]) -> str:
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.7)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"'{key}' is not a ferry or MirrorMaker 2 setting{hint}"

    def unknown_top_level(self, key: str, aliases: list[str]) -> str:
        first, _, rest = key.partition(".")
        if "->" in first:
            source, _, target = first.partition("->")
            missing = source if source not in aliases else target
            return self.unknown_alias(missing, aliases)
        if rest and (rest == "bootstrap.servers" or rest.split(".", 1)[0] in _ROLES):
            return self.unknown_alias(first, aliases)
        known = [k for k in FLOW_KEYS if k != "enabled"] + list(POLICY_KEYS)
        known += [
            "clusters",
            "ferry.state.dir",
            "ferry.once.max.wait.seconds",
            *_API_KEYS,
            *(f"{a}.bootstrap.servers" for a in aliases),
        ]
        return self.unknown_key(key, known)

    # --- clusters -------------------------------------------------------------------------

    def cluster(
        self, alias: str, settings: list[tuple[str, Entry]], inherited: list[Entry]
    ) -> ClusterConfig:
        roles: dict[str, dict[str, str]] = {role: {} for role in ("common", *_ROLES)}
        stores: dict[str, dict[str, Entry]] = {}
        registry: dict[str, Entry] = {}
        bootstrap: str | None = None
        own = {name for name, _ in settings}
        # Top-level security keys apply unless the cluster sets its own (MM2's putIfAbsent).
        settings = settings + [(e.key, e) for e in inherited if e.key not in own]
        for name, entry in settings:
            if name == "bootstrap.servers":
                if not entry.value:
                    raise self.error(entry, "is empty; give host:port[,host:port...]")
                bootstrap = entry.value
                continue
            if name.startswith(SCHEMA_REGISTRY_PREFIX) and entry.key.startswith(f"{alias}."):
                registry[name.removeprefix(SCHEMA_REGISTRY_PREFIX)] = entry
                continue
            if self.is_ignored(entry, name):
                continue
            role, _, client_key = name.partition(".")
            if role not in _ROLES or not client_key:
                role, client_key = "common", name
            if client_key in STORE_KEYS:  # translated together: a store's type names its file
                stores.setdefault(role, {})[client_key] = entry
                continue
            self.client_setting(entry, role, client_key, roles[role])
        for role, entries in stores.items():
            roles[role].update(self.stores(entries))
        if bootstrap is None:
            raise ConfigError(
                f"cluster '{alias}' has no bootstrap servers; set {alias}.bootstrap.servers",
                file=self.file,
                key=f"{alias}.bootstrap.servers",
            )
        return ClusterConfig(
            alias=alias,
            bootstrap_servers=bootstrap,
            schema_registry=self.schema_registry(alias, registry),
            **roles,
        )

    def schema_registry(self, alias: str, entries: dict[str, Entry]) -> dict[str, str]:
        """`A.schema.registry.*`: confluent-kafka's SchemaRegistryClient settings, checked by
        name here so a typo fails at load, not in a Spark task."""
        for key, entry in entries.items():
            if key not in SCHEMA_REGISTRY_KEYS:
                known = [SCHEMA_REGISTRY_PREFIX + k for k in SCHEMA_REGISTRY_KEYS]
                raise self.error(entry, self.unknown_key(entry.key, known))
            if not entry.value:
                raise self.error(entry, "is empty")
        if entries and "url" not in entries:
            first = next(iter(entries.values()))
            raise self.error(
                first, f"needs {alias}.{SCHEMA_REGISTRY_PREFIX}url (the registry's address) too"
            )
        url = entries.get("url")
        if url is not None:
            for part in url.value.split(","):
                if not part.strip().startswith(("http://", "https://")):
                    raise self.error(url, f"'{part.strip()}' is not an http:// or https:// address")
        return {key: entry.value for key, entry in entries.items()}

    def stores(self, entries: dict[str, Entry]) -> dict[str, str]:
        """One role's Java trust and key store keys as librdkafka settings."""
        anyone = next(iter(entries.values()))

        def fail(key: str, message: str) -> ConfigError:
            entry = entries.get(key, anyone)
            prefix = "" if key in entries else f"{key} "
            return self.error(entry, prefix + message)

        return translate_stores({k: e.value for k, e in entries.items()}, fail)

    def client_setting(
        self, entry: Entry, role: str, client_key: str, into: dict[str, str]
    ) -> None:
        fail = self.failer(entry)
        if client_key == "ssl.endpoint.identification.algorithm" and not entry.value.strip():
            into[client_key] = "none"  # Java's empty value turns host name checks off
            return
        if client_key == "sasl.jaas.config":
            credentials = translate_jaas(entry.value, fail)
            register(credentials["sasl.password"])
            into.update(credentials)
            return
        if not check_client_key(client_key, role, fail):
            self.ignored.append(entry.key)
            return
        unsafe = check_safety(client_key, entry.value, role)
        if unsafe is not None:
            raise UnsafeConfigError(unsafe, file=self.file, key=entry.key, line=entry.line)
        into[client_key] = entry.value

    # --- flows ----------------------------------------------------------------------------

    def flow(
        self, source: str, target: str, defaults: dict[str, Entry], own: dict[str, Entry]
    ) -> FlowConfig:
        settings = {**defaults, **own}
        fields: dict[str, Any] = {"source": source, "target": target}
        for key, entry in settings.items():
            if key in FLOW_KEYS:
                field, kind = FLOW_KEYS[key]
                fields[field] = self.value(entry, kind)
        for field, kind in FLOW_KEYS.values():
            # MM2: a negative interval turns the task off, like its `.enabled = false`.
            if kind is Kind.INTERVAL and fields.get(field, 0) < 0:
                fields[field.replace("_interval_seconds", "_enabled")] = False
        audit = own.get("audit.interval.seconds")
        if audit is not None and not fields.get("enabled", False):
            # A flow ferry monitor does not watch would never be audited.
            raise self.error(
                audit,
                f"audits flow {source}->{target}, which is not enabled; set "
                f"'{source}->{target}.enabled = true' or remove the key",
            )
        if fields.get("source_read_only"):
            refused = read_only.source_settings(source, target, settings, self.entries, fields)
            if refused is not None:
                raise self.error(*refused)
        fields["policy"] = self.policy(source, settings)
        flow = FlowConfig(**fields)
        listed = settings.get("topics")
        if flow.enabled and listed is not None:
            policy = flow.replication_policy
            for pattern in flow.topics:
                name = _exact_name(pattern)
                why = policy.internal_rule(name) if name is not None else None
                if name is not None and why is not None:
                    where = (listed.key, listed.line, name, why)
                    self.internal_named.setdefault(where, []).append(flow.name)
        return flow

    def note_internal_topics(self) -> None:
        """A topic listed by name that no flow will copy is said at load (validate and run):
        a silent no-op would let the user believe it replicated while nothing is."""
        for (key, line, topic, why), flows in self.internal_named.items():
            which = f"flow {flows[0]}" if len(flows) == 1 else f"flows {', '.join(flows)}"
            self.notes.append(
                f"key '{key}' (line {line}) names topic '{topic}', which {which} will not "
                f"copy: {why}, and MirrorMaker 2's rule is that internal topics are never "
                "replicated, whatever `topics` says"
            )

    def policy(self, source: str, settings: dict[str, Entry]) -> PolicySpec:
        cls = settings.get("replication.policy.class")
        separator = settings.get("replication.policy.separator")
        rename = settings.get("topic.rename.format")
        kind = "rename" if rename is not None else "prefix"
        if cls is not None:
            kind_of_class = POLICY_CLASSES.get(cls.value)
            if kind_of_class is None:
                allowed = ", ".join(POLICY_CLASSES)
                raise self.error(
                    cls,
                    f"'{cls.value}' is not a replication policy ferry implements; "
                    f"allowed: {allowed} (or set topic.rename.format)",
                )
            if rename is not None and kind_of_class != "rename":
                raise self.error(
                    rename,
                    f"conflicts with replication.policy.class = {cls.value} "
                    f"(line {cls.line}); set one of them, or the class to 'rename'",
                )
            if kind_of_class == "rename" and rename is None:
                raise self.error(cls, "'rename' needs topic.rename.format, e.g. ${topic}.replica")
            kind = kind_of_class
        if separator is not None and not separator.value:
            raise self.error(separator, "is empty; MirrorMaker 2's default is '.'")
        spec = PolicySpec(
            kind=kind,
            separator=separator.value if separator is not None else ".",
            rename_format=rename.value if rename is not None else None,
        )
        try:
            policy_for(spec, source)
        except ValueError as exc:
            culprit = rename or separator or cls
            assert culprit is not None, "the default policy is always valid"
            raise self.error(culprit, str(exc)) from None
        return spec

    def value(self, entry: Entry, kind: Kind) -> object:
        text = entry.value
        if entry.items is not None and kind is not Kind.REGEX_LIST:
            raise self.error(entry, f"takes one {kind.value}, not a list")
        if kind is Kind.BOOL:
            if text.lower() not in ("true", "false"):
                raise self.error(entry, f"'{text}' is not allowed; allowed: true, false")
            return text.lower() == "true"
        if kind in _NUMBER_RULES:
            allowed, ok = _NUMBER_RULES[kind]
            try:
                number = int(text)
            except ValueError:
                number = None
            if number is None or not ok(number):
                raise self.error(entry, f"'{text}' is not allowed; allowed: {allowed}")
            return number
        if kind in _CHOICES:
            choices = _CHOICES[kind]
            if text.lower() not in choices:
                raise self.error(entry, f"'{text}' is not allowed; allowed: {', '.join(choices)}")
            return text.lower()
        patterns = _list_items(entry)
        if entry.items is None and "," in text:
            # A piece that is only whole together with the next one was one regex.
            broken = [
                p
                for p, after in pairwise(patterns)
                if not _balanced(p) and _balanced(f"{p},{after}")
            ]
            if broken:
                pieces = " and ".join(f"'{p}'" for p in patterns)
                raise self.error(
                    entry,
                    f"'{text}' is a list split at every comma, as MirrorMaker 2 splits it, "
                    f"so it reads as {pieces}, and '{broken[0]}' is only part of a regex; a "
                    "regex containing a comma cannot be written in a .properties list: write it "
                    "without one (e.g. '\\d{1,3}' as '\\d\\d?\\d?'), or use ferry.yaml, "
                    "whose lists keep each item whole",
                )
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise self.error(
                    entry, f"'{pattern}' is not a valid regular expression: {exc}"
                ) from None
        return patterns


def _exact_name(pattern: str) -> str | None:
    """The one topic a `topics` item names when it is a plain name (`app.internal`,
    `app\\.internal`); None for a pattern meant to match many. An unescaped '.' counts as
    the dot of a topic name: that is how people write names in MM2's `topics`."""
    name: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            if char.isalnum():
                return None  # a class such as \d or \w
            name.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "^$*+?{}[]|()":
            return None
        else:
            name.append(char)
    return None if escaped or not name else "".join(name)


def _list_items(entry: Entry) -> tuple[str, ...]:
    """A list setting's items: a YAML list item by item; a scalar split on commas with the
    white space around them trimmed, as MirrorMaker 2 reads its LIST settings."""
    items = entry.items if entry.items is not None else entry.value.split(",")
    return tuple(item.strip() for item in items if item.strip())


_PAIRS = {")": "(", "}": "{"}


def _balanced(pattern: str) -> bool:
    """Whether every (, [ and { in a regex is closed: a piece cut at a comma usually is not."""
    stack: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"  # inside [...] only the closing bracket counts
        elif char == "[":
            in_class = True
        elif char in "({":
            stack.append(char)
        elif char == "]" or (char in ")}" and (not stack or stack.pop() != _PAIRS[char])):
            return False  # a closing bracket nothing opened
    return not (stack or in_class)
