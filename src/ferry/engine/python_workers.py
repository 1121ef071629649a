"""Spark's Python worker daemon for ferry: pyspark loaded from its installed, compiled package.

Spark starts every Python worker daemon with `PYTHONPATH=$SPARK_HOME/python/lib/pyspark.zip:
.../py4j-*-src.zip:...`. A zip holds no compiled bytecode and Python cannot cache any for it,
so every worker process compiles pyspark's modules from source again: about 1.1 s of CPU per
process on a 2-core machine (measured: importing `pyspark.worker` takes 1.5 s from the zip,
0.4 s from the installed package), and a streaming query starts about ten such processes (the
task workers and the data source planner, writer and commit workers).

With a pip-installed pyspark, Spark's home is the installed package itself, so the zip and the
package hold the same release. When the installed `pyspark` (and `py4j`) is the same version
as the zip, this daemon drops the zips from `sys.path` before anything imports pyspark, and
the workers load the installed package's precompiled modules. Otherwise (a Spark distribution
with a different or no installed pyspark) it changes nothing. Then it runs Spark's own
daemon, `pyspark.daemon`, unchanged. `ferry run` selects it with `spark.python.daemon.module`.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import zipfile

__all__ = ["installed_matches_zip", "main"]


def _zip_file(archive: str, name: str) -> bytes | None:
    try:
        with zipfile.ZipFile(archive) as zf:
            return zf.read(name)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_file(package: str, name: str, path: list[str]) -> bytes | None:
    saved = sys.path[:]
    try:
        sys.path[:] = path
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        try:
            with open(os.path.join(location, name), "rb") as f:
                return f.read()
        except OSError:
            continue
    return None


def installed_matches_zip(archive: str, package: str, without: list[str]) -> bool:
    """True when `package` importable from the path `without` (the zips removed) has the same
    version file as `archive` does."""
    zipped = _zip_file(archive, f"{package}/version.py")
    return zipped is not None and zipped == _installed_file(package, "version.py", without)


def _spark_zips(path: list[str]) -> dict[str, str]:
    """package -> zip on `path` that Spark put there for it."""
    zips: dict[str, str] = {}
    for entry in path:
        base = os.path.basename(entry)
        if base == "pyspark.zip":
            zips.setdefault("pyspark", entry)
        elif base.startswith("py4j-") and base.endswith("-src.zip"):
            zips.setdefault("py4j", entry)
    return zips


def main() -> None:
    if "pyspark" not in sys.modules:
        zips = _spark_zips(sys.path)
        without = [p for p in sys.path if p not in zips.values()]
        if zips and all(installed_matches_zip(z, pkg, without) for pkg, z in zips.items()):
            sys.path[:] = without
            importlib.invalidate_caches()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
