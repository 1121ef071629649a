"""What `ferry run` does with control records other processes wrote (`Controller.follow`):
a pause acts on the running flow, and a record turning a flow the file disables on (and the
running one off) changes the flows that run. The logs are fakes (no broker);
tests/integration/test_switchover.py does it with a running ferry."""

from __future__ import annotations

from pathlib import Path

from ferry.config import load_config
from ferry.config.model import FerryConfig
from ferry.control.controller import Controller
from ferry.control.log import ControlLog, switchable_flows
from ferry.engine.flow_state import FlowState
from ferry.flows.override import FlowControl


def _config(tmp_path: Path) -> FerryConfig:
    path = tmp_path / "ferry.properties"
    path.write_text(
        "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
        f"A->B.enabled = true\ntopics = orders\nferry.state.dir = {tmp_path / 'state'}\n"
    )
    return load_config(path)


class FollowedLog(ControlLog):
    """A control topic in memory that other processes write to."""

    def __init__(self, config: FerryConfig, alias: str) -> None:
        super().__init__(config.clusters[alias], "ferry-control.internal")
        self.records: dict[str, FlowControl] = {}

    def read(self) -> dict[str, FlowControl]:
        return dict(self.records)

    def follow(self) -> dict[str, FlowControl]:
        return dict(self.records)


def test_the_reverse_of_each_enabled_flow_has_its_control_record_read(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert [f.name for f in switchable_flows(config)] == ["A->B", "B->A"]
    controller = Controller.of(config, print)
    assert set(controller.logs) == {"A->B"} and set(controller.standby) == {"B->A"}
    assert controller.standby["B->A"].where == "ferry-control.internal on A"


def test_records_written_elsewhere_pause_a_flow_and_switch_which_flows_run(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    on_b, on_a = FollowedLog(config, "B"), FollowedLog(config, "A")
    notices: list[str] = []
    controller = Controller(config, notices.append, logs={"A->B": on_b}, standby={"B->A": on_a})
    controller.restore()
    assert controller.follow() is None and notices == []

    on_b.records["A->B"] = FlowControl().pause()
    assert controller.follow() is None  # the same flows run
    state = FlowState(tmp_path / "state" / "A-to-B")
    assert state.control().paused and state.replan_marker.exists()
    assert notices == ["flow A->B: paused, as recorded in ferry-control.internal on B"]

    on_b.records["A->B"] = FlowControl().pause().enable(False)
    on_a.records["B->A"] = FlowControl().enable(True)
    changed = controller.follow()
    assert changed is not None and [f.name for f in changed.enabled_flows] == ["B->A"]
    assert set(controller.flows) == {"B->A"}
    assert notices[1:] == [
        "flow A->B: stopped; paused, as recorded in ferry-control.internal on B",
        "flow B->A: runs, as recorded in ferry-control.internal on A",
    ]
    assert controller.follow() is None  # said once

    # A restart runs what the records say.
    restarted = Controller(config, print, logs={"A->B": on_b}, standby={"B->A": on_a})
    restarted.restore()
    assert [f.name for f in restarted.effective().enabled_flows] == ["B->A"]


def _every_topic(config: FerryConfig, alias: str) -> set[str]:
    return {"first", "second", "third", "mine", "orders"}


class MemoryTopic:
    """A one-partition control topic in memory, read by follow() through a tail; `during_read`
    runs while a read is out (after the records it returns were taken), as the API's thread
    may."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []
        self.read_to = 0
        self.during_read: list[object] = []

    def read_new(self) -> list[tuple[bytes, bytes]]:
        batch, self.read_to = self.records[self.read_to :], len(self.records)
        while self.during_read:
            self.during_read.pop(0)()  # type: ignore[operator]
        return batch  # type: ignore[return-value]


class MemoryLog(ControlLog):
    def __init__(self, config: FerryConfig, topic: MemoryTopic) -> None:
        super().__init__(config.clusters["B"], "ferry-control.internal")
        self.memory = topic
        self._tail = topic  # type: ignore[assignment]

    def read(self) -> dict[str, FlowControl]:
        return self._parse(list(self.memory.records))  # type: ignore[arg-type]

    def _produce(self, key: str, value: bytes) -> None:
        self.memory.records.append((key.encode(), value))


def _running(tmp_path: Path) -> tuple[MemoryTopic, MemoryLog, Controller, FlowState]:
    """A controller of flow A->B following its control topic in memory, restored."""
    config = _config(tmp_path)
    topic = MemoryTopic()
    log = MemoryLog(config, topic)
    controller = Controller(config, print, logs={"A->B": log}, standby={}, topics=_every_topic)
    controller.restore()
    return topic, log, controller, FlowState(tmp_path / "state" / "A-to-B")


def test_a_change_made_here_while_a_look_is_out_is_never_undone_by_an_older_record(
    tmp_path: Path,
) -> None:
    topic, log, controller, state = _running(tmp_path)

    controller.add_topic("A", "B", "first")
    # The next look reads "first"'s record; while it is out, the API adds "second".
    topic.during_read.append(lambda: controller.add_topic("A", "B", "second"))
    assert controller.follow() is None
    assert {"first", "second"} <= set(state.control().added)
    assert controller.follow() is None  # reads "second"'s record back: nothing to undo
    assert {"first", "second"} <= set(state.control().added)
    # A third change is built on the state that has both, so the topic's last record has all.
    controller.add_topic("A", "B", "third")
    assert {"first", "second", "third"} <= set(log.read()["A->B"].added)


def test_a_change_another_process_records_is_followed_and_ours_after_it_wins(
    tmp_path: Path,
) -> None:
    topic, _log, controller, state = _running(tmp_path)

    elsewhere = FlowControl().pause()
    topic.records.append((b"A->B", elsewhere.to_bytes()))
    assert controller.follow() is None
    assert state.control().paused  # another process's change acts here

    topic.records.append((b"A->B", FlowControl().to_bytes()))  # resumed elsewhere ...
    topic.during_read.append(lambda: controller.add_topic("A", "B", "mine"))  # ... then ours
    controller.follow()
    # Ours lies after the record that look read, so it stands, and both are in the topic.
    assert "mine" in state.control().added
    assert controller.follow() is None
    assert "mine" in state.control().added
