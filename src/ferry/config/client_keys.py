"""Per-cluster client settings: Java (MM2) spellings to librdkafka, and the no-loss rules.

MM2 files are written for Java clients; ferry's clients are librdkafka. A key librdkafka does
not know is either translated (sasl.jaas.config), refused with the librdkafka key to use instead
(ssl.truststore.location), ignored with a note (key.deserializer), or a typo ("did you mean").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from ferry.config.keys import JAVA_CLIENT_KEYS, JAVA_ONLY_CLIENT_KEYS
from ferry.config.librdkafka_keys import CONSUMER_KEYS, PRODUCER_KEYS
from ferry.errors import ConfigError

__all__ = ["ROLES", "check_client_key", "check_safety", "translate_jaas"]

# Settings only C programs can pass (callbacks, pointers) are spelled with '_' by librdkafka.
_SETTABLE_CONSUMER = frozenset(k for k in CONSUMER_KEYS if "_" not in k)
_SETTABLE_PRODUCER = frozenset(k for k in PRODUCER_KEYS if "_" not in k)
ROLES: dict[str, frozenset[str]] = {
    "common": _SETTABLE_CONSUMER | _SETTABLE_PRODUCER,
    "consumer": _SETTABLE_CONSUMER,
    "producer": _SETTABLE_PRODUCER,
    "admin": _SETTABLE_CONSUMER | _SETTABLE_PRODUCER,
}

Raise = Callable[[str], ConfigError]


def check_client_key(client_key: str, role: str, fail: Raise) -> bool:
    """True if librdkafka takes `client_key` for `role`; False if it is a Java-only key to
    ignore; raises (through `fail`) for Java keys that need another spelling and for typos."""
    if client_key in ROLES[role]:
        return True
    if client_key in JAVA_ONLY_CLIENT_KEYS:
        return False
    if client_key in JAVA_CLIENT_KEYS:
        raise fail(
            f"is a Java client setting librdkafka does not have; use {JAVA_CLIENT_KEYS[client_key]}"
        )
    close = difflib.get_close_matches(client_key, sorted(ROLES[role]), n=1, cutoff=0.75)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise fail(f"'{client_key}' is not a librdkafka {role} setting{hint}")


_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
    r"(?P<options>(?:\s+[\w.]+\s*=\s*(?:\"(?:[^\"\\]|\\.)*\"|[^\s;\"]+))*)\s*;?\s*$"
)
_JAAS_OPTION = re.compile(r"([\w.]+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))")
_PASSWORD_MODULES = ("PlainLoginModule", "ScramLoginModule")


def translate_jaas(value: str, fail: Raise) -> dict[str, str]:
    """`sasl.jaas.config` (PLAIN or SCRAM login module) as librdkafka's sasl.username/password."""
    match = _JAAS.match(value)
    if match is None:
        raise fail(
            "is not a JAAS login module line like "
            "'org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="u" password="p";\''
        )
    module = match["module"].rsplit(".", 1)[-1]
    if module not in _PASSWORD_MODULES:
        raise fail(
            f"uses {module}, which ferry cannot translate; set librdkafka's own keys instead "
            "(sasl.kerberos.* for GSSAPI, sasl.oauthbearer.* for OAUTHBEARER)"
        )
    options = {
        name: (quoted if quoted is not None else bare).replace('\\"', '"')
        for name, quoted, bare in _JAAS_OPTION.findall(match["options"])
    }
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise fail(f"{module} needs {' and '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


_AUTO_COMMIT = "auto commit would record source progress before the target has the records"
_ACKS = (
    "a write is acknowledged only once every in-sync replica has it; anything less can "
    "lose acknowledged records when the target leader fails"
)
# (librdkafka's names for the setting, role that reads it, values that keep the no-loss
# guarantee with the one ferry sets first, why)
_SAFETY_RULES: tuple[tuple[tuple[str, ...], str, tuple[str, ...], str], ...] = (
    (("enable.auto.commit", "auto.commit.enable"), "consumer", ("false",), _AUTO_COMMIT),
    (
        ("isolation.level",),
        "consumer",
        ("read_committed",),
        "read_uncommitted would copy records of aborted transactions",
    ),
    (("acks", "request.required.acks"), "producer", ("all", "-1"), _ACKS),
    (
        ("enable.idempotence",),
        "producer",
        ("true",),
        "without idempotence a retried batch can be duplicated or reordered on the target",
    ),
)


def check_safety(client_key: str, value: str, role: str) -> str | None:
    """Why a client setting would break ferry's no-loss guarantee, or None if it is safe."""
    for keys, applies_to, allowed, why in _SAFETY_RULES:
        applies = client_key in keys and role in (applies_to, "common")
        if applies and value.strip().lower() not in allowed:
            return (
                f"'{value}' is refused: {why}. ferry sets {client_key}={allowed[0]} itself; "
                "remove the key"
            )
    return None
