"""`<alias>.schema.registry.*` and `sync.schemas.enabled`: read, checked, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import FerryConfig, load_config
from ferry.errors import ConfigError
from ferry.secrets import redact

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
BOTH = (
    "A.schema.registry.url = http://127.0.0.1:8081\n"
    "B.schema.registry.url = https://registry-b:8081\n"
)


def _load(tmp_path: Path, extra: str) -> FerryConfig:
    (tmp_path / "mm2.properties").write_text(BASE + extra)
    return load_config(tmp_path / "mm2.properties")


def test_registries_in_the_clients_names_and_sync_on_when_both_ends_name_one(
    tmp_path: Path,
) -> None:
    config = _load(
        tmp_path,
        BOTH
        + "A->B.enabled = true\n"
        + "B.schema.registry.basic.auth.user.info = ferry:s3cr3t-pass\n"
        + "B.schema.registry.ssl.ca.location = /etc/ca.pem\n",
    )
    assert config.clusters["A"].schema_registry == {"url": "http://127.0.0.1:8081"}
    assert config.clusters["B"].schema_registry == {
        "url": "https://registry-b:8081",
        "basic.auth.user.info": "ferry:s3cr3t-pass",
        "ssl.ca.location": "/etc/ca.pem",
    }
    # Registry settings are not librdkafka settings: no Kafka client gets them.
    assert "url" not in config.clusters["B"].common
    assert config.syncs_schemas(config.flow("A", "B"))
    assert config.syncs_schemas(config.flow("B", "A"))
    assert redact("user ferry:s3cr3t-pass") == "user [hidden]"


def test_sync_off_per_flow_or_with_one_registry(tmp_path: Path) -> None:
    config = _load(tmp_path, BOTH + "B->A.sync.schemas.enabled = false\n")
    assert config.syncs_schemas(config.flow("A", "B"))
    assert not config.syncs_schemas(config.flow("B", "A"))
    one = _load(tmp_path, "A.schema.registry.url = http://127.0.0.1:8081\n")
    assert not one.syncs_schemas(one.flow("A", "B"))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "A.schema.registry.urll = http://x\n",
            "key 'A.schema.registry.urll': 'A.schema.registry.urll' is not a ferry or "
            "MirrorMaker 2 setting; did you mean 'schema.registry.url'?",
        ),
        (
            "A.schema.registry.ssl.ca.location = /ca.pem\n",
            "needs A.schema.registry.url (the registry's address) too",
        ),
        ("A.schema.registry.url = registry:8081\n", "'registry:8081' is not an http://"),
        (
            BOTH + "A->B.enabled = true\nA->B.ferry.copier = native\n",
            "flow A->B syncs schemas (both clusters name a schema registry), and schema ids "
            "are rewritten by the Python copy loop only",
        ),
    ],
)
def test_wrong_registry_settings_name_the_key(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra)
    assert expected in str(info.value)
