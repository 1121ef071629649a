"""Where API changes are kept: each flow's control topic, on its target cluster by default.

The logs here are fakes (no broker); tests/integration/test_control_restart.py restarts a
real flow, and test_control_api.py covers `api.control.cluster`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.control.controller import Controller
from ferry.control.log import ControlLog, control_logs, control_place
from ferry.engine.flow_state import FlowState
from ferry.errors import KafkaUnavailableError, RejectedChangeError
from ferry.flows.override import FlowControl

TOPICS = {"A": {"orders", "extra"}, "B": {"orders"}, "C": {"orders", "extra"}}


def _config(tmp_path: Path, extra: str = "") -> FerryConfig:
    """Flows A->B, C->B and A->C."""
    path = tmp_path / "ferry.properties"
    path.write_text(
        "clusters = A, B, C\n"
        + "".join(f"{a}.bootstrap.servers = 127.0.0.1:{n}\n" for n, a in enumerate("ABC", 1))
        + "A->B.enabled = true\nC->B.enabled = true\nA->C.enabled = true\ntopics = orders\n"
        f"ferry.state.dir = {tmp_path / 'state'}\n{extra}"
    )
    return load_config(path)


class FakeLog(ControlLog):
    """A control topic kept in memory; `down` makes it fail as an unreachable cluster does."""

    def __init__(self, config: FerryConfig, alias: str, topic: str = "ferry-control.internal"):
        super().__init__(config.clusters[alias], topic)
        self.records: dict[str, FlowControl] = {}
        self.reads = 0
        self.down = False

    def _fail(self) -> None:
        if self.down:
            raise KafkaUnavailableError(
                self.cluster.alias,
                self.cluster.bootstrap_servers,
                "timed out",
                what=f"did not keep the change in the control topic {self.topic}",
            )

    def read(self) -> dict[str, FlowControl]:
        self.reads += 1
        self._fail()
        return dict(self.records)

    def write(self, flow: str, control: FlowControl) -> None:
        self._fail()
        self.records[flow] = control


def test_without_a_control_cluster_each_flow_keeps_its_changes_on_its_target(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    assert config.api.control_cluster is None
    assert control_place(config, config.flow("A", "B")) == ("B", "ferry-control.internal")
    logs = control_logs(config)
    assert {name: log.where for name, log in logs.items()} == {
        "A->B": "ferry-control.internal on B",
        "C->B": "ferry-control.internal on B",
        "A->C": "ferry-control.internal on C",
    }
    assert logs["A->B"] is logs["C->B"]  # one topic on B, one client


def test_a_control_cluster_keeps_every_flows_changes(tmp_path: Path) -> None:
    config = _config(tmp_path, "api.control.cluster = A\napi.control.topic = ctl.internal\n")
    logs = control_logs(config)
    assert {log.where for log in logs.values()} == {"ctl.internal on A"}
    assert len({id(log) for log in logs.values()}) == 1


def test_the_controller_of_a_config_writes_each_change_where_its_flow_keeps_them(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    assert set(Controller.of(config, print).logs) == {"A->B", "C->B", "A->C"}
    on_b, on_c = FakeLog(config, "B"), FakeLog(config, "C")
    logs = {"A->B": on_b, "C->B": on_b, "A->C": on_c}
    controller = Controller(config, print, logs=logs, topics=lambda _c, a: TOPICS[a])
    controller.add_topic("A", "B", "extra")
    controller.pause("A", "C")
    assert on_b.records == {"A->B": FlowControl().add("extra")}
    assert on_c.records == {"A->C": FlowControl().pause()}


def test_a_change_its_control_topic_does_not_take_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    on_b = FakeLog(config, "B")
    on_b.down = True
    notices: list[str] = []
    controller = Controller(
        config, notices.append, logs={"A->B": on_b}, topics=lambda _c, a: TOPICS[a]
    )
    with pytest.raises(KafkaUnavailableError) as refused:
        controller.add_topic("A", "B", "extra")
    assert "cluster B (127.0.0.1:2)" in str(refused.value)
    assert "control topic ferry-control.internal" in str(refused.value)
    state = FlowState(tmp_path / "state" / "A-to-B")
    assert state.control() == FlowControl() and not state.replan_marker.exists()
    assert notices == []


def test_a_restart_restores_each_flow_from_its_own_control_topic_read_once(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    on_b, on_c = FakeLog(config, "B"), FakeLog(config, "C")
    on_b.records = {"A->B": FlowControl().add("extra"), "C->B": FlowControl()}
    on_c.records = {"A->C": FlowControl().pause()}
    notices: list[str] = []
    logs = {"A->B": on_b, "C->B": on_b, "A->C": on_c}
    restored = Controller(config, notices.append, logs=logs).restore()
    assert restored == {
        "A->B": FlowControl().add("extra"),
        "C->B": FlowControl(),
        "A->C": FlowControl().pause(),
    }
    assert on_b.reads == 1 and on_c.reads == 1
    assert FlowState(tmp_path / "state" / "A-to-B").control() == FlowControl().add("extra")
    assert sorted(notices) == [
        "flow A->B: topics added: extra, as recorded in ferry-control.internal on B",
        "flow A->C: paused, as recorded in ferry-control.internal on C",
    ]


def test_an_unreadable_control_topic_keeps_what_the_state_dir_last_knew_and_says_so(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    state = FlowState(tmp_path / "state" / "A-to-B")
    state.write_control(FlowControl().add("extra"))
    on_b, on_c = FakeLog(config, "B"), FakeLog(config, "C")
    on_b.down = True
    notices: list[str] = []
    logs = {"A->B": on_b, "C->B": on_b, "A->C": on_c}
    restored = Controller(config, notices.append, logs=logs).restore()
    assert restored["A->B"] == FlowControl().add("extra") == state.control()
    assert len(notices) == 1
    assert notices[0].startswith("could not read the control topic ferry-control.internal on B")
    assert "start with the API changes their state dir last recorded" in notices[0]


def test_an_internal_topic_is_refused_naming_the_rule(tmp_path: Path) -> None:
    controller = Controller(_config(tmp_path), print, topics=lambda _c, _a: {"app-internal"})
    with pytest.raises(RejectedChangeError, match="its name ends in '-internal'"):
        controller.add_topic("A", "B", "app-internal")
