"""Spark's Python processes for ferry: pyspark loaded from its installed, compiled package.

Spark starts every Python process it needs (task workers, and per query the data source
planner, writer, commit and streaming source runners) with `PYTHONPATH=$SPARK_HOME/python/
lib/pyspark.zip:.../py4j-*-src.zip:...`. A zip holds no compiled bytecode and Python cannot
cache any for it, so every one of these processes compiles pyspark's modules from source
again: about 1.1 s of CPU per process on a 2-core machine (importing `pyspark.worker` takes
1.5 s from the zip, 0.4 s from the installed package), and a streaming query starts more than
ten of them, most of them one after the other before its first batch.

With a pip-installed pyspark, Spark's home is the installed package itself, so the zips and
the package hold the same release. Two ways to use the installed package instead, both only
when the installed `pyspark` (and `py4j`) is the same version as the zip:

- `worker_python` (local masters, the driver's own interpreter): a small shell script that
  removes exactly those zips from PYTHONPATH and runs the interpreter; `ferry run` makes it
  `PYSPARK_PYTHON`, so every Python process Spark starts goes through it.
- `main`, Spark's worker daemon (`spark.python.daemon.module`): drops the zips from
  `sys.path` before anything imports pyspark, then runs `pyspark.daemon` unchanged. It covers
  the task workers anywhere (Spark uses the setting for task workers only).

Otherwise nothing changes.

On a cluster the daemon first checks that ferry's shipped environment was built for this
worker's platform (`check_shipped_environment`), so a mismatch fails with the fix instead of
an import error deep in a task.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.util
import os
import runpy
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = [
    "check_shipped_environment",
    "default_cache_dir",
    "installed_matches_zip",
    "main",
    "worker_python",
    "wrapper_script",
]


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


# --- the wrapper (every Python process of a local Spark) ----------------------------------------


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def wrapper_script(python: str, zips: list[str]) -> str:
    """A POSIX shell script running `python` with the exact paths `zips` removed from
    PYTHONPATH (nothing else changes)."""
    cases = "|".join(_shell_quote(z) for z in zips)
    return (
        "#!/bin/sh\n"
        "# Written by ferry (ferry.engine.spark.python_workers): Spark's Python processes without\n"
        "# Spark's pyspark and py4j zips, whose release is installed and compiled here.\n"
        "set -f\n"
        "kept=\n"
        "rest=$PYTHONPATH\n"
        'while [ -n "$rest" ]; do\n'
        "    entry=${rest%%:*}\n"
        '    case "$rest" in *:*) rest=${rest#*:} ;; *) rest= ;; esac\n'
        '    case "$entry" in\n'
        f"        {cases}) ;;\n"
        "        *) kept=${kept:+$kept:}$entry ;;\n"
        "    esac\n"
        "done\n"
        'if [ -n "$kept" ]; then PYTHONPATH=$kept; export PYTHONPATH; '
        "else unset PYTHONPATH; fi\n"
        f'exec {_shell_quote(python)} "$@"\n'
    )


def spark_home() -> str | None:
    from ferry.engine.spark.internals import find_spark_home

    return find_spark_home()


def worker_python(python: str, cache_dir: Path) -> str | None:
    """An executable that runs `python` (the driver's interpreter) for Spark without Spark's
    zips, or None when they are not this interpreter's installed pyspark and py4j (or the
    script cannot run here, say from a noexec directory)."""
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        return None  # the zips' versions are checked against this interpreter's packages
    home = spark_home()
    if home is None:
        return None
    lib = os.path.join(home, "python", "lib")
    zips = {"pyspark": os.path.join(lib, "pyspark.zip")}
    py4j = sorted(glob.glob(os.path.join(lib, "py4j-*-src.zip")))
    if py4j:
        zips["py4j"] = py4j[-1]
    if not all(installed_matches_zip(z, pkg, sys.path) for pkg, z in zips.items()):
        return None
    script = wrapper_script(python, list(zips.values()))
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    path = cache_dir / f"spark-python-{digest}.sh"
    try:
        if not path.exists():
            cache_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".spark-python-")
            with os.fdopen(fd, "w") as f:
                f.write(script)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
        check = subprocess.run(
            [str(path), "-c", "import sys; sys.exit(0)"],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return str(path) if check.returncode == 0 else None


def default_cache_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "ferry"


# --- the daemon (task workers, wherever they run) -------------------------------------------


def check_shipped_environment() -> str | None:
    """Why ferry's shipped environment (`environment.py`) cannot run on this worker, or None
    (also when this Python is not one: a local master, or ferry installed on the worker)."""
    from ferry.engine.spark.environment import MARKER_FILE, Platform, mismatch

    try:
        built = Platform.from_json((Path(sys.prefix) / MARKER_FILE).read_text())
    except (OSError, ValueError, TypeError):
        return None
    from ferry.engine.spark.packing import current_platform

    return mismatch(built, current_platform())


def main() -> None:
    problem = check_shipped_environment()
    if problem is not None:
        # Spark puts a daemon's stderr into the task's error; the driver shows this message.
        from ferry.errors import FerryError, error_to_text

        sys.stderr.write(error_to_text(FerryError(problem)) + "\n")
        sys.stderr.flush()
        sys.exit(1)
    if "pyspark" not in sys.modules:
        zips = _spark_zips(sys.path)
        without = [p for p in sys.path if p not in zips.values()]
        if zips and all(installed_matches_zip(z, pkg, without) for pkg, z in zips.items()):
            sys.path[:] = without
            importlib.invalidate_caches()
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
