"""Which `java` local clusters start, with which tuning, and what a host without one is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local.broker import java_executable, jvm_performance_options


def test_java_home_first_then_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "bin" / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java_executable() == str(home / "bin" / "java")


def test_without_java_the_error_says_what_needs_it_and_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(LocalClusterError) as info:
        java_executable()
    assert str(info.value) == (
        f"Java is not installed (no java on PATH nor in JAVA_HOME={tmp_path / 'no-jdk'}): "
        "Kafka's brokers and Spark need Java 17, e.g. apt-get install openjdk-17-jre-headless"
    )


def test_kafkas_own_tuning_variable_replaces_g1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_JVM_PERFORMANCE_OPTS", raising=False)
    assert jvm_performance_options() == ["-XX:+UseG1GC"]
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", " -XX:TieredStopAtLevel=1  -XX:+UseSerialGC ")
    assert jvm_performance_options() == ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "  ")  # set but empty: the default
    assert jvm_performance_options() == ["-XX:+UseG1GC"]
