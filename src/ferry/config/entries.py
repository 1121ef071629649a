"""Both config formats become one flat list of (key, value, line) entries.

MM2's `.properties` files are flat already; `ferry.yaml` nests, and nesting is spelled with dots
(`sync: {group: {offsets: {enabled: true}}}` is `sync.group.offsets.enabled`). One parser then
reads the entries, so the two formats cannot drift apart. No I/O here beyond `read_entries`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import yaml

from ferry.errors import ConfigError

__all__ = ["Entry", "entries_from_properties", "entries_from_yaml", "read_entries"]

YAML_SUFFIXES = (".yaml", ".yml")


class Entry(NamedTuple):
    """One setting. `items` holds a YAML list item by item: a list stays a list (a regex may
    contain a comma), while a scalar value is split only where MirrorMaker 2 splits it."""

    key: str
    value: str
    line: int
    items: tuple[str, ...] | None = None


def read_entries(path: Path) -> list[Entry]:
    """Entries of a config file; `.yaml`/`.yml` is YAML, anything else java.util.Properties."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the file: {exc}", file=str(path)) from None
    if path.suffix.lower() in YAML_SUFFIXES:
        return entries_from_yaml(text, str(path))
    return entries_from_properties(text)


# --- java.util.Properties ------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_END = re.compile(r"(?<!\\)(?:\\\\)*[=:\s]")


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash-continued lines as java.util.Properties.load does; keep the first line."""
    result: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = number, ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        result.append((start, pending + line))
        pending = None
    if pending is not None:
        result.append((start, pending))
    return result


def entries_from_properties(text: str) -> list[Entry]:
    """Parse java.util.Properties text: comments, `=`/`:`/space separators, continuations,
    escapes (`\\t`, `\\uXXXX`, escaped separators in keys)."""
    entries = []
    for number, line in _logical_lines(text):
        match = _KEY_END.search(line)
        if match is None:
            key, rest = line, ""
        else:
            cut = match.end() - 1
            key, rest = line[:cut], line[cut:]
            rest = rest.lstrip(" \t\f")
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t\f")
        entries.append(Entry(_unescape(key), _unescape(rest), number))
    return entries


# --- YAML ----------------------------------------------------------------------------------


def entries_from_yaml(text: str, file: str) -> list[Entry]:
    """Flatten a YAML mapping into dotted keys; lists keep their items (`Entry.items`).

    `clusters` may be a mapping from alias to that cluster's settings: its keys become the
    `clusters` list and its settings `<alias>.`-prefixed keys, as MM2 spells them.
    """
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", file=file, line=line) from None
    finally:
        loader.dispose()
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(
            "the top level must be a mapping of settings", file=file, line=root.start_mark.line + 1
        )
    entries: list[Entry] = []
    for key_node, value_node in root.value:
        key = _yaml_key(key_node, file)
        if key == "clusters" and isinstance(value_node, yaml.MappingNode):
            aliases = [_yaml_key(k, file) for k, _ in value_node.value]
            line = key_node.start_mark.line + 1
            entries.append(Entry("clusters", ",".join(aliases), line, tuple(aliases)))
            for (alias_node, settings), alias in zip(value_node.value, aliases, strict=True):
                if isinstance(settings, yaml.ScalarNode) and settings.value in ("", "~", "null"):
                    continue
                _flatten(settings, alias, entries, file, alias_node.start_mark.line + 1)
        else:
            _flatten(value_node, key, entries, file, key_node.start_mark.line + 1)
    return entries


def _yaml_key(node: yaml.Node, file: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError("a key must be plain text", file=file, line=node.start_mark.line + 1)
    return str(node.value).strip()


def _scalar_text(node: yaml.ScalarNode, key: str, file: str) -> str:
    value = yaml.SafeLoader("").construct_object(node)
    if value is None:
        raise ConfigError(
            "has no value; give one or remove the key",
            file=file,
            key=key,
            line=node.start_mark.line + 1,
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _flatten(node: yaml.Node, key: str, out: list[Entry], file: str, key_line: int) -> None:
    if isinstance(node, yaml.MappingNode):
        for child_key, child in node.value:
            _flatten(
                child,
                f"{key}.{_yaml_key(child_key, file)}",
                out,
                file,
                child_key.start_mark.line + 1,
            )
    elif isinstance(node, yaml.SequenceNode):
        items = []
        for item in node.value:
            if not isinstance(item, yaml.ScalarNode):
                raise ConfigError(
                    "list items must be plain values",
                    file=file,
                    key=key,
                    line=item.start_mark.line + 1,
                )
            items.append(_scalar_text(item, key, file))
        out.append(Entry(key, ",".join(items), key_line, tuple(items)))
    else:
        assert isinstance(node, yaml.ScalarNode)
        out.append(Entry(key, _scalar_text(node, key, file), key_line))
