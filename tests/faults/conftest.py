"""The fault suite's session: two 3-node clusters (RF 3, min.insync.replicas 2) behind link
proxies, and one `ferry run` per delivery mode copying A to B across them, all started once
and shared; every test heals what it broke (nodes started, links restored, ferry running)
before the next begins."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferry.errors import LocalClusterError
from ferry.local import clusters as local
from ferry.local.cluster import LocalCluster
from tests.chaos.faults import FerryProcess
from tests.faults.harness import MODES, SESSION_RUNS, FaultCase, FlowRun, write_flow_config
from tests.faults.invariants import Mode
from tests.ferry_cli import run_ferry

# A follower that stops fetching leaves the ISR after 10 s (Kafka's default is 30 s): the
# min.insync.replicas fault is reached sooner; nothing else differs from Kafka's defaults.
FAULT_BROKER = {"replica.lag.time.max.ms": "10000"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The 1,000 topics last: deleting their 10,000 partitions keeps the brokers busy for
    minutes after the test (in one run both flows' next lease waited almost 5 minutes for
    the target), which the next fault would meet as a fault of its own."""
    items.sort(key=lambda item: item.nodeid.startswith("tests/faults/test_shape.py"))


@pytest.fixture(scope="session")
def fault_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="session")
def fault_clusters(fault_dir: Path) -> Iterator[dict[str, LocalCluster]]:
    directory = fault_dir / "clusters"
    # Through the command line an operator rehearsing failures uses.
    args = ["local", "up", "--clusters", "A,B", "--brokers", "3", "--link-proxy", "--json"]
    # Six JVMs starting at once on 2 cores beside other suites' processes: minutes, not 120 s.
    args += ["--timeout", "420"]
    for key, value in FAULT_BROKER.items():
        args += ["--set", f"{key}={value}"]
    result = run_ferry(*args, "--dir", str(directory))
    assert result.returncode == 0, result.stderr
    clusters = local.read_state(directory)
    assert json.loads(result.stdout) == {a: c.bootstrap for a, c in clusters.items()}
    try:
        yield clusters
    finally:
        heal(directory)
        local.down(directory)


@pytest.fixture(scope="session")
def flow_runs(
    fault_dir: Path, fault_clusters: dict[str, LocalCluster]
) -> Iterator[dict[Mode, FlowRun]]:
    runs: dict[Mode, FlowRun] = {}
    for mode in MODES:
        directory = fault_dir / mode
        config = write_flow_config(directory, fault_clusters, mode)
        runs[mode] = FlowRun(mode, config, FerryProcess(config, directory))
        runs[mode].process.start()
    SESSION_RUNS.update(runs)
    try:
        yield runs
    finally:
        for run in runs.values():
            if run.process.alive():
                with contextlib.suppress(Exception):
                    run.process.sigterm(120)
            if run.process.alive():
                run.process.sigkill()


def heal(directory: Path) -> None:
    """Every node running and awake, every link open."""
    import signal

    for alias, cluster in local.read_state(directory).items():
        for node in cluster.nodes:
            if node.is_running():
                with contextlib.suppress(LocalClusterError, OSError):
                    node.send(signal.SIGCONT)
            else:
                local.start_node(directory, alias, node.node_id)
        if cluster.link:
            local.link_command(directory, alias, "restore")


@pytest.fixture
def case(
    request: pytest.FixtureRequest,
    fault_dir: Path,
    fault_clusters: dict[str, LocalCluster],
    flow_runs: dict[Mode, FlowRun],
) -> Iterator[FaultCase]:
    """A fault's traffic in both modes, on topics of its own; healed afterwards."""
    directory = fault_dir / "clusters"
    heal(directory)
    for run in flow_runs.values():
        run.ensure_running()
    name = request.node.name.replace("_", "-").replace("[", "-").rstrip("]")[:60]
    case = FaultCase(f"{name}-{uuid.uuid4().hex[:6]}", directory, flow_runs)
    try:
        yield case
    finally:
        case.stop()
        heal(directory)
        # The flows stop copying them: every test meets clusters and flows of the same weight.
        case.delete_source_topics()
