"""One rule tells a local path from a filesystem URI, for every command that takes a location
(`ferry reconcile --export`, `ferry failover spark-checkpoint`, the client library)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.locations import is_local, is_uri, local_path, uri_scheme


@pytest.mark.parametrize(
    ("location", "scheme"),
    [
        ("hdfs://127.0.0.1:8020/x", "hdfs"),
        ("hdfs:/x", "hdfs"),  # Hadoop's default namenode
        ("s3a://bucket/x", "s3a"),
        ("webhdfs+ssl://nn/x", "webhdfs+ssl"),
        ("FILE:///x", "file"),
        ("file:/x", "file"),
        ("/var/ferry", None),
        ("out", None),
        ("weird:name/out", None),  # a colon in a local name, no `:/`
        ("C:/ferry", None),  # a drive letter, not a scheme
        ("1x://y", None),  # a scheme starts with a letter
    ],
)
def test_a_uri_has_a_scheme_of_two_characters_or_more_then_a_slash(
    location: str, scheme: str | None
) -> None:
    assert uri_scheme(location) == scheme
    assert is_uri(location) == (scheme is not None)
    assert is_local(location) == (scheme in (None, "file"))


def test_a_path_object_is_local_even_if_its_text_looks_like_a_uri() -> None:
    assert is_local(Path("hdfs:/x")) and not is_uri(Path("hdfs:/x"))


@pytest.mark.parametrize(
    ("location", "path"),
    [("file:///var/x", "/var/x"), ("file:/var/x", "/var/x"), ("/var/x", "/var/x"), ("x", "x")],
)
def test_a_local_location_names_its_path(location: str, path: str) -> None:
    assert local_path(location) == Path(path)
