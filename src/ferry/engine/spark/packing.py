"""Builds the archive of ferry's environment that executors run from, and caches it per machine.

The archive is made by venv-pack from a staging virtualenv (`ARCHIVES_DIR/…staging`) that
holds this virtualenv's run-time distributions (hard links, so staging costs no copy) and
ferry itself installed as a plain package. A virtualenv with ferry installed in editable mode
(`pip install -e`, as `make setup` does) only points at the source tree, which no worker has:
venv-pack rightly refuses to pack it, and staging turns the editable install into a normal
one, with the native copy loop that was built in place.

Built on first use by a `ferry run` on a cluster master, or ahead of time by `ferry pack`;
named by `environment.archive_key`, so a change to ferry or to any shipped distribution gets a
new archive, and kept like the JVM class archive (the most recent few).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ferry.engine.spark.environment import (
    MARKER_FILE,
    Platform,
    archive_key,
    requirement_name,
    runtime_closure,
)
from ferry.errors import ConfigError

__all__ = ["DRIVER_ONLY", "EXCLUDED", "PackedEnvironment", "current_platform", "ensure_archive"]

# Not needed by an executor: Spark's jars (the workers run their own Spark), pyspark's
# examples and sample data. About 460 of pyspark's 490 MB.
EXCLUDED = (
    "lib/python*/site-packages/pyspark/jars/*",
    "lib/python*/site-packages/pyspark/examples/*",
    "lib/python*/site-packages/pyspark/data/*",
)
# ferry's requirements that only the driver uses (drawing `ferry topology --png`): with what
# only they need (numpy, fonts, imaging), about 170 MB that no executor imports.
DRIVER_ONLY = ("matplotlib",)
KEEP_ARCHIVES = 2  # per machine, the most recently used
# The archive is written once and unpacked by every executor: fast beats small here (level 1
# is about twice as fast as venv-pack's default 4 and a few percent larger).
COMPRESS_LEVEL = 1


@dataclass(frozen=True)
class PackedEnvironment:
    """An archive of ferry's environment and how it came to be."""

    path: Path
    key: str
    platform: Platform
    interpreter: str  # what the archive's bin/python links to; every worker needs it
    built: bool  # False: it was in the cache
    seconds: float


def current_platform() -> Platform:
    libc, version = platform.libc_ver()
    return Platform(
        system=platform.system(),
        machine=platform.machine(),
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        libc=f"{libc} {version}".strip() if libc else "",
    )


def archives_dir(cache_dir: Path) -> Path:
    return cache_dir / "environments"


def _site_packages() -> Path:
    return (
        Path(sys.prefix)
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / ("site-packages")
    )


def _installed() -> dict[str, importlib.metadata.Distribution]:
    """This virtualenv's distributions by normalised name (the first one on sys.path wins)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(requirement_name(dist.metadata["Name"]), dist)
    return found


def _run_time_requires(dist: importlib.metadata.Distribution) -> list[str]:
    from packaging.requirements import Requirement

    names = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        # Markers evaluated for this interpreter, without extras: `ferry[dev]` is not shipped.
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement_name(requirement.name))
    return names


def _ferry_dir() -> Path:
    import ferry

    return Path(ferry.__file__).resolve().parent


def _package_files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            yield path


def _package_digest(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in _package_files(directory):
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _interpreter() -> str:
    """The interpreter this virtualenv's python links to (what venv-pack keeps linking to)."""
    return os.path.realpath(sys.executable)


def ensure_archive(cache_dir: Path, create: bool = True) -> PackedEnvironment | None:
    """The archive of this environment: from the cache, else built when `create`."""
    started = time.monotonic()
    if sys.prefix == sys.base_prefix:
        raise ConfigError(
            f"ferry runs from {sys.executable}, which is not a virtualenv, so there is no "
            "environment to ship to the executors. Fix: install ferry in a virtualenv "
            "(python3.11 -m venv) and run it from there, or install ferry on every worker "
            "and set spark.pyspark.python to that Python"
        )
    installed = _installed()
    if "ferry" not in installed:
        raise ConfigError("ferry's distribution metadata is missing: reinstall ferry (pip)")
    requires = {name: _run_time_requires(dist) for name, dist in installed.items()}
    names = runtime_closure("ferry", requires, skip=DRIVER_ONLY)
    versions = {name: installed[name].version for name in names}
    here = current_platform()
    interpreter = _interpreter()
    key = archive_key(interpreter, here, versions, _package_digest(_ferry_dir()), EXCLUDED)
    directory = archives_dir(cache_dir)
    final = directory / f"ferry-env-{key}.tar.gz"
    if final.exists():
        with contextlib.suppress(OSError):
            os.utime(final)  # recently used: kept when old archives are pruned
        return PackedEnvironment(final, key, here, interpreter, False, time.monotonic() - started)
    if not create:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    _prune(directory, KEEP_ARCHIVES - 1)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".staging-") as staging:
        prefix = Path(staging) / "env"
        _stage(prefix, [installed[n] for n in names if n != "ferry"], installed["ferry"], here)
        pending = Path(staging) / "ferry-env.tar.gz"
        _venv_pack(prefix, pending)
        os.replace(pending, final)
    return PackedEnvironment(final, key, here, interpreter, True, time.monotonic() - started)


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _stage(
    prefix: Path,
    dists: list[importlib.metadata.Distribution],
    ferry_dist: importlib.metadata.Distribution,
    here: Platform,
) -> None:
    """A virtualenv at `prefix` with exactly `dists` and ferry, installed normally."""
    source = Path(sys.prefix)
    site = prefix / _site_packages().relative_to(source)
    site.mkdir(parents=True)
    shutil.copy2(source / "pyvenv.cfg", prefix / "pyvenv.cfg")
    (prefix / "bin").mkdir()
    for name in ("python", "python3", f"python{here.python}"):
        link = source / "bin" / name
        if link.is_symlink():
            os.symlink(os.readlink(link), prefix / "bin" / name)
    for dist in dists:
        for file in dist.files or ():
            if ".." in file.parts:
                continue  # console scripts in bin/: executors run none
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                _link_or_copy(path, site / file)
    package = _ferry_dir()
    for path in _package_files(package):
        _link_or_copy(path, site / "ferry" / path.relative_to(package))
    # ferry's own metadata, as a normal install has it (no editable hook, no direct_url.json).
    info = f"ferry-{ferry_dist.version}.dist-info"
    for name in ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "INSTALLER"):
        text = ferry_dist.read_text(name)
        if text is not None:
            (site / info).mkdir(exist_ok=True)
            (site / info / name).write_text(text)
    (prefix / MARKER_FILE).write_text(here.to_json() + "\n")


def _venv_pack(prefix: Path, output: Path) -> None:
    import venv_pack

    env = venv_pack.Env(str(prefix))
    for pattern in EXCLUDED:
        env = env.exclude(pattern)
    env.pack(output=str(output), format="tar.gz", compress_level=COMPRESS_LEVEL, force=True)


def _prune(directory: Path, keep: int) -> None:
    """Keep the `keep` most recently used archives (each ferry change makes a new one)."""
    archives = sorted(
        directory.glob("ferry-env-*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for old in archives[keep:]:
        with contextlib.suppress(OSError):
            old.unlink()
