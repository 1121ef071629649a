"""How long the target's producers wait to fill a request (engine/copy/client_settings.py).

At-least-once copies linger a millisecond, so that librdkafka's one request per partition
carries more than a record or two; an exactly-once slice commits only once its copies are
acknowledged, so its writers do not linger. A `B.producer.linger.ms` of the user's wins in
both modes.
"""

from __future__ import annotations

from pathlib import Path

from ferry.config.loader import load_config
from ferry.config.model import FerryConfig
from ferry.engine.copy.client_settings import producer_settings
from ferry.engine.copy.types import CopyContext
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.spark.task_support import transactional_producers

CTX = CopyContext("A", "a:1", "ida", "B", "b:1", "idb")


def _config(tmp_path: Path, *lines: str) -> FerryConfig:
    path = tmp_path / "ferry.properties"
    path.write_text(
        "\n".join(
            [
                "clusters = A, B",
                "A.bootstrap.servers = 127.0.0.1:9092",
                "B.bootstrap.servers = 127.0.0.1:9093",
                "A->B.enabled = true",
                "A->B.topics = orders",
                *lines,
            ]
        )
        + "\n"
    )
    return load_config(path)


def _exactly_once_writer(config: FerryConfig) -> dict[str, str]:
    flow = config.flows[0]
    assert flow.exactly_once
    settings, _producer_for = transactional_producers(FlowSpec.of(config, flow), CTX, "0")
    return settings.for_task("0")


def test_at_least_once_copies_linger_a_millisecond(tmp_path: Path) -> None:
    config = _config(tmp_path)

    assert producer_settings(config.clusters["B"])["linger.ms"] == "1"


def test_exactly_once_task_writers_do_not_linger(tmp_path: Path) -> None:
    config = _config(tmp_path, "exactly.once.source.support = enabled")

    writer = _exactly_once_writer(config)

    assert writer["transactional.id"].startswith("ferry:A->B:task/0")
    assert writer["linger.ms"] == "0"


def test_a_linger_the_user_sets_wins_in_both_modes(tmp_path: Path) -> None:
    config = _config(tmp_path, "B.producer.linger.ms = 5", "exactly.once.source.support = enabled")

    assert producer_settings(config.clusters["B"])["linger.ms"] == "5"
    assert _exactly_once_writer(config)["linger.ms"] == "5"
