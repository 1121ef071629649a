"""`A->B.source.read.only`: ferry writes nothing to A; every setting that would is refused at
load, naming the key and its line; MM2's own keys for it load as MM2 users write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.errors import ConfigError

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _load(tmp_path: Path, extra: str) -> FerryConfig:
    (tmp_path / "mm2.properties").write_text(BASE + extra)
    return load_config(tmp_path / "mm2.properties")


def test_heartbeats_are_off_and_the_source_is_read_only_everywhere(tmp_path: Path) -> None:
    config = _load(tmp_path, "A->B.enabled = true\nA->B.source.read.only = true\n")
    flow = config.flow("A", "B")
    assert flow.source_read_only
    assert not flow.emit_heartbeats_enabled  # the one thing ferry would write to A
    assert config.read_only_clusters == frozenset({"A"})


def test_read_only_is_off_by_default_and_heartbeats_stay_on(tmp_path: Path) -> None:
    config = _load(tmp_path, "A->B.enabled = true\n")
    assert not config.flow("A", "B").source_read_only
    assert config.flow("A", "B").emit_heartbeats_enabled
    assert config.read_only_clusters == frozenset()


def test_mm2s_keys_for_a_read_only_source_load_and_write_nothing_to_it(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        "A->B.enabled = true\nemit.heartbeats.enabled = false\n"
        "offset-syncs.topic.location = target\n",
    )
    assert not config.flow("A", "B").emit_heartbeats_enabled
    assert any("offset-syncs.topic.location" in note for note in config.notes)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "A->B.enabled = true\nA->B.source.read.only = true\nemit.heartbeats.enabled = true\n",
            "mm2.properties:6, key 'emit.heartbeats.enabled': writes heartbeats to A, and "
            "A->B.source.read.only = true keeps A unwritten: set it to false or remove it",
        ),
        (
            "A->B.enabled = true\nA->B.source.read.only = true\n"
            "A->B.offset-syncs.topic.location = source\n",
            "mm2.properties:6, key 'A->B.offset-syncs.topic.location': asks for offset syncs "
            "on A, and A->B.source.read.only = true keeps A unwritten",
        ),
        (
            "A->B.enabled = true\nB->A.enabled = true\nsource.read.only = true\n",
            "flow B->A would write its copies to A, and source.read.only = true (line 6) keeps "
            "A unwritten: turn one of them off",
        ),
        (
            "A->B.enabled = true\nA->B.source.read.only = true\napi.control.cluster = A\n",
            "mm2.properties:6, key 'api.control.cluster': keeps the API's changes on A, and "
            "A->B.source.read.only = true (line 5) keeps A unwritten: name another cluster",
        ),
        (
            "A->B.enabled = true\noffset-syncs.topic.location = nowhere\n",
            "'nowhere' is not allowed; allowed: source, target",
        ),
    ],
)
def test_a_setting_that_would_write_to_a_read_only_source_is_refused(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra)
    assert message in str(info.value)
    assert "mm2.properties" in str(info.value)
