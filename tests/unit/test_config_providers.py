"""Secrets from the environment or a file (`${env:NAME}`, `${file:PATH:KEY}`), in both formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import FerryConfig, load_config
from ferry.errors import ConfigError
from ferry.secrets import redact
from tests.ferry_cli import run_ferry

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="ferry" password="{password}";'
)


def _load(path: Path, text: str) -> FerryConfig:
    path.write_text(text)
    return load_config(path)


def _error(path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        _load(path, text)
    return str(info.value)


@pytest.fixture
def secrets_file(tmp_path: Path) -> Path:
    directory = tmp_path / "secrets"
    directory.mkdir()
    path = directory / "kafka.properties"
    path.write_text(f"b.jaas = {JAAS.format(password='file-pw-91f0')}\nother = unrelated-value\n")
    return path


def test_properties_file_takes_a_password_from_env_and_a_jaas_line_from_a_file(
    tmp_path: Path, secrets_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TEST_PW", "env-pw-3c7d")
    cfg = _load(
        tmp_path / "mm2.properties",
        BASE + "A.sasl.username = ferry\nA.sasl.password = ${env:FERRY_TEST_PW}\n"
        "B.sasl.jaas.config = ${file:secrets/kafka.properties:b.jaas}\n",
    )
    assert cfg.clusters["A"].common["sasl.password"] == "env-pw-3c7d"
    assert cfg.clusters["B"].common == {"sasl.username": "ferry", "sasl.password": "file-pw-91f0"}
    assert cfg.secrets == {
        "A.sasl.password": ("${env:FERRY_TEST_PW}",),
        "B.sasl.jaas.config": ("${file:secrets/kafka.properties:b.jaas}",),
    }
    # Both values (and the password inside the JAAS line) are masked wherever ferry prints.
    text = f"a: env-pw-3c7d, b: {JAAS.format(password='file-pw-91f0')}, alone: file-pw-91f0"
    assert redact(text) == "a: [hidden], b: [hidden], alone: [hidden]"


def test_yaml_takes_the_same_references(
    tmp_path: Path, secrets_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TEST_PW", "env-pw-3c7d")
    cfg = _load(
        tmp_path / "ferry.yaml",
        "clusters:\n"
        "  A: {bootstrap.servers: '127.0.0.1:1', sasl.password: '${env:FERRY_TEST_PW}'}\n"
        "  B:\n    bootstrap.servers: 127.0.0.1:2\n"
        "    sasl: {jaas.config: '${file:secrets/kafka.properties:b.jaas}'}\n",
    )
    assert cfg.clusters["A"].common["sasl.password"] == "env-pw-3c7d"
    assert cfg.clusters["B"].common["sasl.password"] == "file-pw-91f0"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "A.sasl.password = ${env:FERRY_TEST_UNSET}",
            "key 'A.sasl.password': ${env:FERRY_TEST_UNSET}: environment variable "
            "FERRY_TEST_UNSET is not set",
        ),
        (
            "A.sasl.password = ${file:secrets/kafka.properties:a.password}",
            "key 'A.sasl.password': ${file:secrets/kafka.properties:a.password}: {dir}/secrets/"
            "kafka.properties has no key 'a.password'",
        ),
        (
            "A.sasl.password = ${file:secrets/none.properties:pw}",
            "key 'A.sasl.password': ${file:secrets/none.properties:pw}: no such file "
            "{dir}/secrets/none.properties",
        ),
        (
            "A.sasl.password = ${vault:secret/kafka:pw}",
            "key 'A.sasl.password': ${vault:secret/kafka:pw}: no config provider named 'vault'",
        ),
        (
            "A.sasl.password = ${file:pw}",
            "${file:pw}: a file reference is ${file:PATH:KEY}",
        ),
    ],
)
def test_a_reference_that_cannot_be_resolved_names_key_and_reference_never_a_value(
    tmp_path: Path,
    secrets_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    message: str,
) -> None:
    monkeypatch.delenv("FERRY_TEST_UNSET", raising=False)
    error = _error(tmp_path / "mm2.properties", BASE + line + "\n")
    assert message.replace("{dir}", str(tmp_path)) in error
    assert ":4," in error  # the line
    assert "file-pw-91f0" not in error and "unrelated-value" not in error


def test_mm2_provider_declarations_name_providers_and_limit_what_they_read(
    tmp_path: Path, secrets_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TEST_PW", "env-pw-3c7d")
    declared = (
        "config.providers = secrets, environment\n"
        "config.providers.secrets.class = "
        "org.apache.kafka.common.config.provider.FileConfigProvider\n"
        f"config.providers.secrets.param.allowed.paths = {secrets_file.parent}\n"
        "config.providers.environment.class = EnvVarConfigProvider\n"
        "config.providers.environment.param.allowlist.pattern = FERRY_TEST_.*\n"
    )
    path = tmp_path / "mm2.properties"
    cfg = _load(
        path,
        BASE + declared + "A.sasl.password = ${environment:FERRY_TEST_PW}\n"
        f"B.sasl.jaas.config = ${{secrets:{secrets_file}:b.jaas}}\n",
    )
    assert cfg.clusters["A"].common["sasl.password"] == "env-pw-3c7d"
    assert cfg.clusters["B"].common["sasl.password"] == "file-pw-91f0"

    outside = tmp_path / "elsewhere.properties"
    outside.write_text("pw = x\n")
    error = _error(path, BASE + declared + f"A.sasl.password = ${{secrets:{outside}:pw}}\n")
    assert f"{outside} is outside allowed.paths" in error
    error = _error(path, BASE + declared + "A.sasl.password = ${environment:HOME}\n")
    assert "environment variable HOME is outside allowlist.pattern" in error
    error = _error(
        path, BASE + "config.providers = v\nconfig.providers.v.class = com.example.Vault\n"
    )
    assert "'com.example.Vault' is a config provider ferry cannot run" in error


def test_validate_names_each_secret_and_its_source_and_prints_no_value(
    tmp_path: Path, secrets_file: Path
) -> None:
    config = tmp_path / "mm2.properties"
    config.write_text(
        BASE + "A.sasl.username = ferry\nA.sasl.password = ${env:FERRY_TEST_PW}\n"
        "B.sasl.jaas.config = ${file:secrets/kafka.properties:b.jaas}\n"
        "B.ssl.key.password = literal-pw-0a9e\n"
    )
    result = run_ferry("validate", "-c", str(config), env={"FERRY_TEST_PW": "env-pw-3c7d"})
    assert result.returncode == 0, result.stderr
    assert (
        "secrets (printed as [hidden]): A.sasl.password (${env:FERRY_TEST_PW}), "
        "B.sasl.jaas.config (${file:secrets/kafka.properties:b.jaas}), "
        "B.ssl.key.password (in the file)"
    ) in result.stdout
    for secret in ("env-pw-3c7d", "file-pw-91f0", "literal-pw-0a9e"):
        assert secret not in result.stdout + result.stderr
