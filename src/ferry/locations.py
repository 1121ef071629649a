"""Where files go: a local path or a filesystem URI, told apart by one rule everywhere.

A location is a URI when it starts with a scheme of two characters or more (RFC 3986: a
letter, then letters, digits, `+`, `-` or `.`) followed by `:/`: `hdfs://nn:8020/x`, `hdfs:/x`
(the default namenode), `s3a://bucket/x`, `file:///x`, `file:/x`. Anything else is a local
path, also one with a colon in a name (`backup:2026/x`) and a Windows drive (`C:/x`). Spark
and Hadoop read every URI through Hadoop's FileSystem; a `file:` URI ferry reads itself.

Pure: no I/O.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["is_local", "is_uri", "local_path", "uri_scheme"]

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):/")


def uri_scheme(location: str | Path) -> str | None:
    """The scheme of a URI, lower case (`hdfs`, `file`); None for a local path."""
    if isinstance(location, Path):
        return None  # a Path is never a URI (and would have folded `//` into `/`)
    match = _SCHEME.match(location)
    return match[1].lower() if match else None


def is_uri(location: str | Path) -> bool:
    """A filesystem URI (any scheme, `file:` too): kept exactly as given."""
    return uri_scheme(location) is not None


def is_local(location: str | Path) -> bool:
    """A local path or a `file:` URI: files on this machine; anything else is for Hadoop."""
    return uri_scheme(location) in (None, "file")


def local_path(location: str | Path) -> Path:
    """The local path a local location names (`file:///x`, `file:/x` and `/x` are `/x`)."""
    if uri_scheme(location) != "file":
        return Path(location)
    rest = str(location)[len("file:") :]
    if rest.startswith("//"):  # file://host/x: the host part is empty on this machine
        rest = "/" + rest[2:].partition("/")[2]
    return Path(rest)
