"""`audit.interval.seconds`: off unless set, per flow or for every flow, refused when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.errors import ConfigError

BASE = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"


def _load(tmp_path: Path, extra: str) -> dict[str, int | None]:
    (tmp_path / "mm2.properties").write_text(BASE + extra)
    config = load_config(tmp_path / "mm2.properties")
    return {f.name: f.audit_interval_seconds for f in config.flows}


def test_no_flow_is_audited_unless_the_key_is_set(tmp_path: Path) -> None:
    assert _load(tmp_path, "A->B.enabled = true\n") == {"A->B": None, "B->A": None}


def test_set_for_one_flow_or_as_a_default_for_every_flow(tmp_path: Path) -> None:
    one = _load(tmp_path, "A->B.enabled = true\nA->B.audit.interval.seconds = 300\n")
    assert one == {"A->B": 300, "B->A": None}
    every = _load(tmp_path, "A->B.enabled = true\naudit.interval.seconds = 60\n")
    assert every == {"A->B": 60, "B->A": 60}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "A->B.enabled = true\naudit.interval.seconds = 0\n",
            "key 'audit.interval.seconds': '0' is not allowed; allowed: whole seconds, 1 or more "
            "(how often `ferry monitor` audits the flow); leave the key out for no continuous "
            "audit",
        ),
        ("A->B.enabled = true\nA->B.audit.interval.seconds = 1m\n", "'1m' is not allowed"),
        (
            "A->B.audit.interval.seconds = 60\n",
            "key 'A->B.audit.interval.seconds': audits flow A->B, which is not enabled; set "
            "'A->B.enabled = true' or remove the key",
        ),
    ],
)
def test_a_value_that_would_do_nothing_or_nonsense_is_refused(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, extra)
    assert message in str(info.value)
    assert "mm2.properties" in str(info.value)
