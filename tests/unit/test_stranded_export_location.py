"""Where `ferry reconcile --export DIR` writes: a Hadoop filesystem URI kept exactly as given
(a `Path` would have turned `hdfs://nn:8020/x` into `hdfs:/nn:8020/x`), a local path made
absolute and handed to Spark as a `file:` URI."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ferry.audit.stranded_export import _for_spark, export_directory
from ferry.locations import is_uri

PLAN: Any = SimpleNamespace(flow=SimpleNamespace(source="A", target="B"))


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("hdfs://127.0.0.1:8020/stranded", "hdfs://127.0.0.1:8020/stranded/A-to-B"),
        ("hdfs://127.0.0.1:8020/stranded/", "hdfs://127.0.0.1:8020/stranded/A-to-B"),
        ("s3a://dr-bucket/x", "s3a://dr-bucket/x/A-to-B"),
        ("file:///var/ferry", "file:///var/ferry/A-to-B"),
    ],
)
def test_a_filesystem_uri_is_kept_as_given(given: str, written: str) -> None:
    assert is_uri(given)
    assert export_directory(PLAN, given) == written
    assert _for_spark(written) == written


def test_a_local_path_is_made_absolute_and_given_to_spark_as_a_file_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert not is_uri("out") and not is_uri("weird:name/out")
    written = export_directory(PLAN, "out")
    assert written == str(tmp_path / "out" / "A-to-B")
    assert _for_spark(written) == (tmp_path / "out" / "A-to-B").as_uri()
