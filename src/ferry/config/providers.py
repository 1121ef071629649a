"""Config providers: a setting's value read from the environment or a file at load.

Kafka's syntax (`ConfigTransformer`), so an MM2 file using them loads unchanged:

    A.sasl.password = ${env:KAFKA_A_PASSWORD}
    A.sasl.jaas.config = ${file:/etc/ferry/secrets.properties:a.jaas}

`${env:NAME}` is the environment variable NAME; `${file:PATH:KEY}` is KEY of the
java.util.Properties file PATH (relative paths start at the config file's directory);
`${dir:PATH:NAME}` is the whole file NAME in directory PATH. These three need no
declaration; MM2's `config.providers = a, b` with `config.providers.a.class = ...` names
providers (Kafka's FileConfigProvider, EnvVarConfigProvider, DirectoryConfigProvider) under
other names, and their `param.allowed.paths` / `param.allowlist.pattern` limit what they read.

A reference that cannot be resolved is an error naming the reference and why, never a value:
Kafka leaves such a reference in place, and a password that is literally `${env:PW}` only
fails later, at the broker, as an authentication error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ferry.config.entries import Entry, entries_from_properties
from ferry.errors import ConfigError

__all__ = [
    "PROVIDER_CLASSES",
    "PROVIDER_PARAMS",
    "ProviderError",
    "Providers",
    "Reference",
    "declared_providers",
    "references",
]

# Kafka's ConfigTransformer.DEFAULT_PATTERN: ${provider:[path:]key}.
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")

PROVIDER_CLASSES = {
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
}
PROVIDER_PARAMS = {
    "env": ("allowlist.pattern",),
    "file": ("allowed.paths",),
    "dir": ("allowed.paths",),
}


@dataclass(frozen=True)
class Reference:
    text: str  # as written: ${file:/etc/ferry/secrets.properties:a.jaas}
    provider: str
    path: str | None
    key: str


def references(value: str) -> list[Reference]:
    return [Reference(m[0], m[1], m[2], m[3]) for m in _REFERENCE.finditer(value)]


class ProviderError(Exception):
    """A reference that cannot be resolved; the message names it, never a secret."""

    def __init__(self, reference: str, message: str) -> None:
        super().__init__(f"{reference}: {message}")


class Providers:
    """The providers a config file may use: name -> kind (`env`, `file`, `dir`), with limits."""

    def __init__(
        self,
        kinds: Mapping[str, str] | None = None,
        params: Mapping[str, Mapping[str, str]] | None = None,
        base_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.kinds = {"env": "env", "file": "file", "dir": "dir", **(kinds or {})}
        self.params = params or {}
        self.base_dir = base_dir or Path.cwd()
        self.environ = os.environ if environ is None else environ

    def resolve(self, value: str) -> tuple[str, list[Reference]]:
        """`value` with every reference replaced, and the references it held."""
        found = references(value)
        if not found:
            return value, []
        resolved = _REFERENCE.sub(lambda m: self._one(Reference(m[0], m[1], m[2], m[3])), value)
        return resolved, found

    def _one(self, ref: Reference) -> str:
        kind = self.kinds.get(ref.provider)
        if kind is None:
            known = ", ".join(sorted(self.kinds))
            raise ProviderError(
                ref.text,
                f"no config provider named '{ref.provider}' (ferry has {known}; declare others "
                "with config.providers and config.providers.<name>.class)",
            )
        params = self.params.get(ref.provider, {})
        if kind == "env":
            return self._env(ref, params)
        return self._file(ref, params) if kind == "file" else self._dir(ref, params)

    def _env(self, ref: Reference, params: Mapping[str, str]) -> str:
        if ref.path:
            raise ProviderError(ref.text, "an environment reference is ${env:NAME}")
        allow = params.get("allowlist.pattern")
        if allow is not None and re.fullmatch(allow, ref.key) is None:
            raise ProviderError(
                ref.text, f"environment variable {ref.key} is outside allowlist.pattern"
            )
        if ref.key not in self.environ:
            raise ProviderError(ref.text, f"environment variable {ref.key} is not set")
        return self.environ[ref.key]

    def _file(self, ref: Reference, params: Mapping[str, str]) -> str:
        if not ref.path:
            raise ProviderError(ref.text, "a file reference is ${file:PATH:KEY}")
        path = self._allowed(ref, ref.path, params)
        text = _read(ref, path)
        values = {entry.key: entry.value for entry in entries_from_properties(text)}
        if ref.key not in values:
            raise ProviderError(ref.text, f"{path} has no key '{ref.key}'")
        return values[ref.key]

    def _dir(self, ref: Reference, params: Mapping[str, str]) -> str:
        if not ref.path:
            raise ProviderError(ref.text, "a directory reference is ${dir:PATH:FILE}")
        directory = self._allowed(ref, ref.path, params)
        if "/" in ref.key or ref.key in ("", ".", ".."):
            raise ProviderError(ref.text, f"'{ref.key}' is not a file name in {directory}")
        return _read(ref, directory / ref.key)

    def _allowed(self, ref: Reference, written: str, params: Mapping[str, str]) -> Path:
        path = (self.base_dir / Path(written).expanduser()).resolve()
        allowed = params.get("allowed.paths")
        if allowed is not None:
            roots = [Path(p.strip()).resolve() for p in allowed.split(",") if p.strip()]
            if not any(path == root or root in path.parents for root in roots):
                raise ProviderError(ref.text, f"{path} is outside allowed.paths ({allowed})")
        return path


def _read(ref: Reference, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProviderError(ref.text, f"no such file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProviderError(ref.text, f"cannot read {path}: {exc.__class__.__name__}") from None


def declared_providers(
    entries: dict[str, Entry], base_dir: Path, error: Callable[[Entry, str], ConfigError]
) -> Providers:
    """MM2's `config.providers` declarations, taken out of `entries`, as Providers."""
    names_entry = entries.pop("config.providers", None)
    declared = {
        key: entries.pop(key) for key in list(entries) if key.startswith("config.providers.")
    }
    names = [n.strip() for n in names_entry.value.split(",") if n.strip()] if names_entry else []
    kinds: dict[str, str] = {}
    params: dict[str, dict[str, str]] = {}
    for key, entry in declared.items():
        name, _, setting = key.removeprefix("config.providers.").partition(".")
        if name not in names:
            raise error(entry, f"provider '{name}' is not listed in config.providers")
        if setting == "class":
            kind = PROVIDER_CLASSES.get(entry.value) or PROVIDER_CLASSES.get(
                f"org.apache.kafka.common.config.provider.{entry.value}"
            )
            if kind is None:
                allowed = ", ".join(c.rsplit(".", 1)[-1] for c in PROVIDER_CLASSES)
                raise error(
                    entry,
                    f"'{entry.value}' is a config provider ferry cannot run; allowed: {allowed}",
                )
            kinds[name] = kind
    missing = [name for name in names if name not in kinds]
    if missing and names_entry is not None:
        raise error(
            names_entry, f"provider '{missing[0]}' has no config.providers.{missing[0]}.class"
        )
    for key, entry in declared.items():
        name, _, setting = key.removeprefix("config.providers.").partition(".")
        if setting == "class":
            continue
        param = setting.removeprefix("param.")
        allowed_params = PROVIDER_PARAMS[kinds[name]]
        if not setting.startswith("param.") or param not in allowed_params:
            raise error(
                entry,
                f"'{setting}' is not a setting of provider '{name}'; allowed: class, "
                + ", ".join(f"param.{p}" for p in allowed_params),
            )
        params.setdefault(name, {})[param] = entry.value
    return Providers(kinds, params, base_dir)
