"""Spark's Python processes load pyspark compiled: zips found, versions compared, wrapper."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from ferry.engine.spark.python_workers import _spark_zips, installed_matches_zip, wrapper_script


def make_zip(path: Path, package: str, version: str) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{package}/__init__.py", "")
        zf.writestr(f"{package}/version.py", f"__version__ = '{version}'\n")
    return str(path)


def make_package(root: Path, package: str, version: str) -> str:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "version.py").write_text(f"__version__ = '{version}'\n")
    return str(root)


def test_spark_zips_are_found_on_the_path() -> None:
    path = ["", "/s/python/lib/pyspark.zip", "/s/python/lib/py4j-0.10.9.9-src.zip", "/x/site"]
    assert _spark_zips(path) == {
        "pyspark": "/s/python/lib/pyspark.zip",
        "py4j": "/s/python/lib/py4j-0.10.9.9-src.zip",
    }
    assert _spark_zips(["/x/site", "/y/other.zip"]) == {}


def test_the_installed_package_must_be_the_zips_release(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "pyspark.zip", "fakespark", "4.3.0")
    same = make_package(tmp_path / "same", "fakespark", "4.3.0")
    other = make_package(tmp_path / "other", "fakespark", "4.2.0")
    assert installed_matches_zip(archive, "fakespark", [same])
    assert not installed_matches_zip(archive, "fakespark", [other])
    assert not installed_matches_zip(archive, "fakespark", [str(tmp_path / "nothing")])
    assert not installed_matches_zip(str(tmp_path / "missing.zip"), "fakespark", [same])


def run_wrapper(tmp_path: Path, zips: list[str], pythonpath: str | None) -> str | None:
    script = tmp_path / "python.sh"
    # `env` stands in for the interpreter: the script execs it with the cleaned environment.
    script.write_text(wrapper_script("/usr/bin/env", zips))
    script.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run([str(script)], env=env, capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        if line.startswith("PYTHONPATH="):
            return line.removeprefix("PYTHONPATH=")
    return None


def test_the_wrapper_removes_exactly_the_zips(tmp_path: Path) -> None:
    zips = ["/s/lib/pyspark.zip", "/s/lib/py4j-0.10.9.9-src.zip"]
    mixed = "/s/lib/pyspark.zip:/s/lib/py4j-0.10.9.9-src.zip:/a b/c:/other/pyspark.zip:/d"
    assert run_wrapper(tmp_path, zips, mixed) == "/a b/c:/other/pyspark.zip:/d"
    assert run_wrapper(tmp_path, zips, "/s/lib/pyspark.zip") is None
    assert run_wrapper(tmp_path, zips, None) is None
    assert run_wrapper(tmp_path, zips, "/x/*:/y") == "/x/*:/y"


def test_the_wrapper_quotes_odd_paths(tmp_path: Path) -> None:
    zips = ["/it's here/pyspark.zip"]
    assert run_wrapper(tmp_path, zips, "/it's here/pyspark.zip:/kept") == "/kept"
