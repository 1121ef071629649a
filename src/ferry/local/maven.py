"""Jars downloaded once from a Maven repository by URL, each checked against a pinned SHA-256.

Kafka's release, Spark's Kafka connector and Apicurio Registry reach ferry only as Maven
artifacts. The exact files each needs (runtime dependencies included) are pinned in
`jars.lock.json`, shipped in this package and written by `scripts/jars/lock.py`, so no host
that runs ferry needs Maven: each file is fetched from `<repository>/<group path>/<artifact>/
<version>/<file>` (Maven Central unless `FERRY_MAVEN_REPOSITORY` names a mirror) and kept only
if its SHA-256 is the pinned one. Files land in a temporary folder that is renamed to `libs/`
and then marked complete, so an interrupted download is never taken as whole. A download holds
an exclusive lock on its cache folder: processes or threads that need the same bundle at once
(`ferry local up` starts both clusters side by side on an empty cache) wait for the first one's
files instead of replacing `libs/` under a JVM that is already reading it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from ferry.errors import LocalClusterError

__all__ = [
    "COMPLETE_MARK",
    "DEFAULT_REPOSITORY",
    "Artifact",
    "download_bundle",
    "download_files",
    "exclusive",
    "holds",
    "is_complete",
    "locked",
    "repository",
]

COMPLETE_MARK = ".complete"
LOCK_MARK = ".lock"
DEFAULT_REPOSITORY = "https://repo1.maven.org/maven2"
REPOSITORY_ENV = "FERRY_MAVEN_REPOSITORY"
LOCK_FILE = "jars.lock.json"
PARALLEL_DOWNLOADS = 4
TIMEOUT_SECONDS = 60.0  # per request; a jar is at most a few tens of MB


@dataclass(frozen=True)
class Artifact:
    """One pinned file: Maven coordinates `group:artifact:type[:classifier]:version`."""

    coordinates: str
    sha256: str

    @property
    def file_name(self) -> str:
        _group, artifact, kind, *classifier, version = self.coordinates.split(":")
        return f"{artifact}-{version}" + "".join(f"-{c}" for c in classifier) + f".{kind}"

    def url(self, base: str) -> str:
        group, artifact, _kind, *_classifier, version = self.coordinates.split(":")
        path = "/".join([*group.split("."), artifact, version, self.file_name])
        return f"{base.rstrip('/')}/{path}"


def is_complete(home: Path) -> bool:
    return (home / COMPLETE_MARK).exists()


@contextmanager
def exclusive(home: Path) -> Iterator[None]:
    """Hold `home`'s download lock: one download into a cache folder at a time, across threads
    and processes (each `open` is its own lock, so threads of one process exclude each other)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / LOCK_MARK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def holds(home: Path, bundle: str) -> bool:
    """Complete, and holding every file the lock pins now (a lock that gained a file since)."""
    return is_complete(home) and all((home / "libs" / a.file_name).exists() for a in locked(bundle))


def repository() -> str:
    """The Maven repository jars are downloaded from."""
    return os.environ.get(REPOSITORY_ENV) or DEFAULT_REPOSITORY


@cache
def _lock() -> dict[str, list[Artifact]]:
    text = resources.files("ferry.local").joinpath(LOCK_FILE).read_text()
    return {
        name: [Artifact(a["coordinates"], a["sha256"]) for a in artifacts]
        for name, artifacts in json.loads(text)["bundles"].items()
    }


def locked(bundle: str) -> list[Artifact]:
    """The files pinned for `bundle` (`kafka-4.1.1`, ...)."""
    try:
        return _lock()[bundle]
    except KeyError:
        raise LocalClusterError(
            f"{LOCK_FILE} pins no files for {bundle!r} (it has {sorted(_lock())}); a pinned "
            "version was changed without running scripts/jars/lock.py"
        ) from None


def download_bundle(home: Path, bundle: str, what: str, *, quiet: bool = True) -> Path:
    """Download every file pinned for `bundle` into `home/libs` and mark `home` complete. `what`
    names the download in errors and progress lines. Nothing is downloaded when another caller
    completed the bundle while this one waited for the lock."""
    with exclusive(home):
        if holds(home, bundle):
            return home
        staging = Path(tempfile.mkdtemp(prefix="libs-", dir=home))
        try:
            download_files(bundle, staging, what, home, quiet=quiet)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        libs = home / "libs"
        shutil.rmtree(libs, ignore_errors=True)
        staging.rename(libs)
        (home / COMPLETE_MARK).write_text(bundle + "\n")
    return home


def download_files(bundle: str, folder: Path, what: str, home: Path, *, quiet: bool = True) -> None:
    """Download every file pinned for `bundle` into `folder`, each checked. A failure names the
    URL and what to do, where `home` is the cache folder the files are for."""
    artifacts = locked(bundle)
    base = repository()
    if not quiet:
        print(f"downloading {what}: {len(artifacts)} files from {base}", flush=True)
    try:
        with (
            httpx.Client(timeout=TIMEOUT_SECONDS, follow_redirects=True) as client,
            ThreadPoolExecutor(PARALLEL_DOWNLOADS) as pool,
        ):
            for future in [pool.submit(_download, client, a, base, folder) for a in artifacts]:
                future.result()
    except LocalClusterError as e:
        raise LocalClusterError(
            f"could not download {what}: {e}. Set {REPOSITORY_ENV} to a Maven repository this "
            f"host can reach, or copy {home} from a host where `ferry local provision` ran."
        ) from e


def _download(client: httpx.Client, artifact: Artifact, base: str, folder: Path) -> None:
    url = artifact.url(base)
    try:
        digest = _fetch(client, url, folder / artifact.file_name)
    except httpx.HTTPStatusError as e:
        raise LocalClusterError(f"{url} answered HTTP {e.response.status_code}") from e
    except httpx.HTTPError as e:
        raise LocalClusterError(f"{url}: {type(e).__name__}: {e}") from e
    if digest != artifact.sha256:
        raise LocalClusterError(
            f"{url} has SHA-256 {digest}, not the pinned {artifact.sha256} "
            f"({artifact.coordinates}); the file was not kept"
        )


@retry(
    retry=retry_if_exception_type(httpx.TransportError),  # a refused or dropped connection
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=1, max=8),
    reraise=True,
)
def _fetch(client: httpx.Client, url: str, path: Path) -> str:
    """Stream `url` into `path`; its SHA-256."""
    digest = hashlib.sha256()
    with client.stream("GET", url) as response:
        response.raise_for_status()
        with path.open("wb") as out:
            for chunk in response.iter_bytes(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    return digest.hexdigest()
