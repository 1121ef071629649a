"""Jars downloaded by URL from a Maven repository (a real HTTP server on 127.0.0.1 serving a
folder laid out as one): each file checked against the lock, nothing half-done kept, and an
operator told what failed and what to do."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from ferry.errors import LocalClusterError
from ferry.local import maven
from ferry.local.distribution import kafka_bundle
from ferry.local.maven import Artifact, download_bundle, is_complete, locked
from ferry.local.schema_registry import apicurio_bundle
from ferry.local.spark_kafka import spark_kafka_bundle

GOOD = b"a jar's bytes"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Maven repository over HTTP on 127.0.0.1: its URL and the folder it serves."""
    root = tmp_path / "repository"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/maven2", root
    finally:
        server.shutdown()
        server.server_close()


def _publish(root: Path, coordinates: str, content: bytes) -> Artifact:
    artifact = Artifact(coordinates, hashlib.sha256(content).hexdigest())
    path = root / artifact.url("maven2")  # served as <server>/maven2/...
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return artifact


def _lock(monkeypatch: pytest.MonkeyPatch, bundle: str, artifacts: list[Artifact]) -> None:
    monkeypatch.setattr(maven, "_lock", lambda: {bundle: artifacts})


def test_urls_and_file_names_follow_the_maven_repository_layout() -> None:
    jar = Artifact("org.apache.kafka:kafka_2.13:jar:4.1.1", "0" * 64)
    archive = Artifact("io.apicurio:apicurio-registry-app:tar.gz:all:2.6.13.Final", "0" * 64)
    assert jar.url("https://repo/m2/") == (
        "https://repo/m2/org/apache/kafka/kafka_2.13/4.1.1/kafka_2.13-4.1.1.jar"
    )
    assert archive.file_name == "apicurio-registry-app-2.6.13.Final-all.tar.gz"
    assert archive.url("https://repo/m2") == (
        "https://repo/m2/io/apicurio/apicurio-registry-app/2.6.13.Final/"
        "apicurio-registry-app-2.6.13.Final-all.tar.gz"
    )


def test_every_pinned_release_is_in_the_shipped_lock() -> None:
    """The versions in the code and the lock agree (a version bumped without relocking fails
    here, not on a user's first `ferry local up`), and the lock holds what the poms name."""
    kafka = {":".join(a.coordinates.split(":")[:2]) for a in locked(kafka_bundle())}
    assert {
        "org.apache.kafka:kafka_2.13",
        "org.apache.kafka:kafka-tools",
        "org.apache.kafka:connect-mirror",
        "org.apache.logging.log4j:log4j-core",
    } <= kafka
    connector = [a.file_name for a in locked(spark_kafka_bundle("2.13"))]
    assert any(name.startswith("spark-sql-kafka-0-10_2.13-") for name in connector)
    [registry] = locked(apicurio_bundle())
    assert registry.file_name.endswith("-all.tar.gz")
    lock = json.loads((Path(maven.__file__).parent / maven.LOCK_FILE).read_text())
    for artifacts in lock["bundles"].values():
        names = [Artifact(**a).file_name for a in artifacts]
        assert len(names) == len(set(names))  # side by side in one folder
        assert all(len(a["sha256"]) == 64 for a in artifacts)


def test_a_bundle_is_downloaded_checked_and_marked_complete(
    repository: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = repository
    artifacts = [
        _publish(root, "org.example:one:jar:1.0", GOOD),
        _publish(root, "org.example:two:jar:linux:2.0", GOOD * 2),
    ]
    _lock(monkeypatch, "example-1", artifacts)
    monkeypatch.setenv("FERRY_MAVEN_REPOSITORY", url)
    home = download_bundle(tmp_path / "home", "example-1", "the example jars")
    assert is_complete(home)
    assert (home / "libs" / "one-1.0.jar").read_bytes() == GOOD
    assert (home / "libs" / "two-2.0-linux.jar").read_bytes() == GOOD * 2
    assert sorted(p.name for p in home.iterdir()) == [".complete", ".lock", "libs"]


def test_a_file_that_is_not_the_pinned_one_is_refused_and_nothing_is_kept(
    repository: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = repository
    good = _publish(root, "org.example:one:jar:1.0", GOOD)
    tampered = _publish(root, "org.example:two:jar:2.0", b"another jar")
    pinned = Artifact(tampered.coordinates, hashlib.sha256(b"the jar it should be").hexdigest())
    _lock(monkeypatch, "example-1", [good, pinned])
    monkeypatch.setenv("FERRY_MAVEN_REPOSITORY", url)
    home = tmp_path / "home"
    with pytest.raises(LocalClusterError) as info:
        download_bundle(home, "example-1", "the example jars")
    message = str(info.value)
    assert f"{url}/org/example/two/2.0/two-2.0.jar has SHA-256 {tampered.sha256}" in message
    assert f"not the pinned {pinned.sha256}" in message
    assert not is_complete(home)
    assert [p.name for p in home.iterdir()] == [".lock"]  # not even the good file


def test_a_missing_file_and_an_unreachable_repository_name_the_url_and_the_way_out(
    repository: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _root = repository
    _lock(monkeypatch, "example-1", [Artifact("org.example:gone:jar:1.0", "0" * 64)])
    monkeypatch.setenv("FERRY_MAVEN_REPOSITORY", url)
    home = tmp_path / "home"
    with pytest.raises(LocalClusterError) as info:
        download_bundle(home, "example-1", "the example jars")
    assert f"{url}/org/example/gone/1.0/gone-1.0.jar answered HTTP 404" in str(info.value)
    assert f"copy {home} from a host where `ferry local provision` ran" in str(info.value)
    assert not is_complete(home)

    monkeypatch.setattr(maven, "_fetch", maven._fetch.retry_with(stop=lambda _state: True))
    monkeypatch.setenv("FERRY_MAVEN_REPOSITORY", "http://127.0.0.1:9/offline")  # discard port
    with pytest.raises(LocalClusterError) as info:
        download_bundle(home, "example-1", "the example jars")
    message = str(info.value)
    assert "could not download the example jars: http://127.0.0.1:9/offline/org/example" in message
    assert "ConnectError" in message
    assert "Set FERRY_MAVEN_REPOSITORY to a Maven repository this host can reach" in message


def test_a_release_the_lock_does_not_pin_says_how_to_pin_it() -> None:
    with pytest.raises(LocalClusterError, match=r"pins no files for 'kafka-9\.9\.9'.*lock\.py"):
        locked("kafka-9.9.9")


class _Held(_Quiet):
    """Serves a file only once `release` is set, and counts the files asked for."""

    release = threading.Event()
    asked: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        assert self.release.wait(60)
        super().do_GET()


def _lock_waiters() -> int:
    """flock() calls blocked on a lock, host-wide (`->` lines of /proc/locks)."""
    return sum("->" in line for line in Path("/proc/locks").read_text().splitlines())


def test_two_callers_on_an_empty_cache_download_once_and_the_second_waits_for_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ferry local up` starts both clusters side by side: the second must not replace the
    files the first one's JVM is already reading (it did: a broker failed to find its main
    class), nor take a bundle as complete before it is."""
    root = tmp_path / "repository"
    artifacts = [
        _publish(root, "org.example:one:jar:1.0", GOOD),
        _publish(root, "org.example:two:jar:2.0", GOOD * 2),
    ]
    _lock(monkeypatch, "example-1", artifacts)
    _Held.release.clear()
    _Held.asked.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Held, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(
        "FERRY_MAVEN_REPOSITORY", f"http://127.0.0.1:{server.server_address[1]}/maven2"
    )
    home = tmp_path / "home"
    results: dict[str, Path | BaseException] = {}

    def download(name: str) -> None:
        try:
            results[name] = download_bundle(home, "example-1", "the example jars")
        except BaseException as e:  # reported by the assertion below
            results[name] = e

    try:
        first = threading.Thread(target=download, args=("first",))
        first.start()
        deadline = time.monotonic() + 30
        while not _Held.asked:  # the first download is under way, held by the server
            assert time.monotonic() < deadline, "the first download never asked for a file"
            time.sleep(0.01)
        waiters = _lock_waiters()
        second = threading.Thread(target=download, args=("second",))
        second.start()
        while _lock_waiters() <= waiters:  # the second caller waits on the cache's lock
            assert time.monotonic() < deadline, "the second caller did not wait for the first"
            time.sleep(0.01)
        assert not is_complete(home)
        _Held.release.set()
        first.join(60)
        second.join(60)
    finally:
        _Held.release.set()
        server.shutdown()
        server.server_close()
    assert results == {"first": home, "second": home}
    assert sorted(_Held.asked) == sorted(f"/maven2/{a.url('')[1:]}" for a in artifacts)
    assert (home / "libs" / "two-2.0.jar").read_bytes() == GOOD * 2
