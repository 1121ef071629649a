"""MM2's Java trust and key stores as librdkafka settings.

A Java client names its CA certificates and its own key through stores (`ssl.truststore.*`,
`ssl.keystore.*`); librdkafka reads PEM files and PKCS#12 key stores. So, per cluster and role:

- a PEM truststore file becomes `ssl.ca.location`; inline `ssl.truststore.certificates`
  becomes `ssl.ca.pem`;
- a PKCS#12 truststore is opened here (with `ssl.truststore.password`) and its certificates
  become `ssl.ca.pem`: librdkafka has no PKCS#12 trust store;
- a PKCS#12 keystore stays `ssl.keystore.location` + `ssl.keystore.password` (librdkafka's
  keys have the same names); a PEM keystore file (key and chain in one) becomes
  `ssl.key.location` and `ssl.certificate.location`; inline `ssl.keystore.key` /
  `ssl.keystore.certificate.chain` become `ssl.key.pem` / `ssl.certificate.pem`;
- a JKS (or JCEKS) store, Kafka's default type, cannot be read by librdkafka: refused, naming
  the key and the keytool command that converts it.

A store's format is read off the file itself, not `ssl.*store.type`: Java opens a PKCS#12
file declared JKS (`keystore.type.compat`), and such files are common, so the declared type
only decides for a file this machine cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from ferry.errors import ConfigError

__all__ = ["STORE_KEYS", "sniff_store", "translate_stores"]

STORE_KEYS = frozenset(
    {
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
    }
)
_TYPES = ("JKS", "PKCS12", "PEM")
Format = Literal["JKS", "JCEKS", "PKCS12", "PEM"]
# key -> ConfigError naming that key
Fail = Callable[[str, str], ConfigError]


def sniff_store(data: bytes) -> Format | None:
    """The store format of a file's bytes, or None when it is none of them."""
    if data.startswith(b"\xfe\xed\xfe\xed"):
        return "JKS"
    if data.startswith(b"\xce\xce\xce\xce"):
        return "JCEKS"
    if b"-----BEGIN " in data[:4096]:
        return "PEM"
    if data[:1] == b"\x30":  # a DER SEQUENCE: PKCS#12's PFX
        return "PKCS12"
    return None


def _convert_hint(key: str, path: str, store: str) -> str:
    if store == "truststore":
        return (
            f"export its CA certificates as PEM (keytool -exportcert -rfc -keystore {path} "
            "-alias <alias> -file ca.pem) and set ssl.ca.location = ca.pem, or convert it "
            f"(keytool -importkeystore -srckeystore {path} -destkeystore truststore.p12 "
            "-deststoretype PKCS12) and point ssl.truststore.location at truststore.p12"
        )
    return (
        f"convert it (keytool -importkeystore -srckeystore {path} -destkeystore keystore.p12 "
        f"-deststoretype PKCS12) and point {key} at keystore.p12"
    )


def _store_format(
    key: str, path: str, declared: str, read: Callable[[str], bytes], fail: Fail, store: str
) -> tuple[Format, bytes]:
    try:
        data = read(path)
    except OSError as exc:
        if declared == "PEM":  # nothing to open: librdkafka reads it by path
            return "PEM", b""
        raise fail(
            key, f"cannot read {path} ({exc.strerror}) to see what kind of store it is"
        ) from None
    found = sniff_store(data)
    if found in ("JKS", "JCEKS"):
        raise fail(
            key,
            f"{path} is a {found} {store}, which librdkafka (ferry's Kafka client) cannot "
            f"read; {_convert_hint(key, path, store)}",
        )
    if found is None:
        raise fail(key, f"{path} is not a PEM, PKCS12 or JKS {store}")
    return found, data


def _type(values: Mapping[str, str], key: str, fail: Fail) -> str:
    declared = values.get(key, "JKS").strip().upper()
    if declared not in _TYPES:
        raise fail(key, f"'{values[key]}' is not one of {', '.join(_TYPES)}")
    return declared


def _orphans(values: Mapping[str, str], prefix: str, location: str, fail: Fail) -> None:
    """A store's password or type without the store would be dropped without a word."""
    for key in sorted(k for k in values if k.startswith(prefix)):
        raise fail(key, f"is set but {location} is not; set it or remove the key")


def _truststore(
    values: Mapping[str, str], read: Callable[[str], bytes], fail: Fail
) -> dict[str, str]:
    inline = values.get("ssl.truststore.certificates")
    if inline is not None:
        return {"ssl.ca.pem": inline}
    path = values.get("ssl.truststore.location")
    key = "ssl.truststore.location"
    if path is None:
        _orphans(values, "ssl.truststore.", key, fail)
        return {}
    declared = _type(values, "ssl.truststore.type", fail)
    found, data = _store_format(key, path, declared, read, fail, "truststore")
    if found == "PEM":
        return {"ssl.ca.location": path}
    # Imported only for a PKCS12 truststore: the config package stays light for the client
    # library, and a process that never opens one never maps cryptography's OpenSSL.
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    password = values.get("ssl.truststore.password")
    try:
        bundle = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise fail(
            key,
            f"{path} is a PKCS12 truststore ferry could not open: check ssl.truststore.password",
        ) from None
    certificates = [c.certificate for c in bundle.additional_certs]
    if bundle.cert is not None:
        certificates.insert(0, bundle.cert.certificate)
    if not certificates:
        raise fail(key, f"{path} holds no certificates")
    return {"ssl.ca.pem": "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)}


def _keystore(
    values: Mapping[str, str], read: Callable[[str], bytes], fail: Fail
) -> dict[str, str]:
    key_pem, chain = values.get("ssl.keystore.key"), values.get("ssl.keystore.certificate.chain")
    if key_pem is not None or chain is not None:
        if key_pem is None or chain is None:
            missing = "ssl.keystore.key" if key_pem is None else "ssl.keystore.certificate.chain"
            raise fail(missing, "is needed too: a PEM keystore is a private key and its chain")
        return {"ssl.key.pem": key_pem, "ssl.certificate.pem": chain}
    path = values.get("ssl.keystore.location")
    key = "ssl.keystore.location"
    if path is None:
        _orphans(values, "ssl.keystore.", key, fail)
        return {}
    declared = _type(values, "ssl.keystore.type", fail)
    found, _ = _store_format(key, path, declared, read, fail, "keystore")
    if found == "PEM":
        return {"ssl.key.location": path, "ssl.certificate.location": path}
    password = values.get("ssl.keystore.password")
    return {
        "ssl.keystore.location": path,
        **({"ssl.keystore.password": password} if password else {}),
    }


def translate_stores(
    values: Mapping[str, str], fail: Fail, read: Callable[[str], bytes] | None = None
) -> dict[str, str]:
    """librdkafka settings for one role's Java store keys (`values`: those of STORE_KEYS it
    sets). `read` opens a store file (tests pass their own); `fail(key, why)` makes the
    error naming the key."""
    read = read or (lambda path: Path(path).expanduser().read_bytes())
    return {**_truststore(values, read, fail), **_keystore(values, read, fail)}
