"""One local Kafka cluster of one or more KRaft nodes, the shape production clusters have.

With 3 nodes or more the first three are combined broker+controller nodes (a 3-voter quorum,
so one controller may die), the rest brokers only; internal and new topics get replication
factor 3 with `min.insync.replicas = 2`, as Kafka's own system tests run them. With fewer
nodes, node 1 is the only controller and replication follows the node count. A single-node
cluster is exactly `ferry.local.broker.start_broker`'s.

A cluster may stand behind a link proxy (`ferry.local.link_proxy`): each node then has a `LINK`
listener whose advertised address is the proxy's port, so a client that bootstraps through
the proxy learns only proxy addresses and every connection it opens crosses the link.
"""

from __future__ import annotations

import base64
import contextlib
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.errors import LocalClusterError
from ferry.kafka import clients
from ferry.local.broker import BrokerProcess, NodePlan, launch, prepare_node

__all__ = ["LocalCluster", "replication_settings", "start_cluster"]


def replication_settings(nodes: int) -> dict[str, str]:
    """Broker settings for a cluster of `nodes` nodes: RF min(3, nodes) for internal and new
    topics, `min.insync.replicas` 2 from 3 nodes on (1 below: one node down must not stop a
    two-node cluster's writes)."""
    factor = str(min(3, nodes))
    min_isr = "2" if nodes >= 3 else "1"
    return {
        "default.replication.factor": factor,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


@dataclass
class LocalCluster:
    """A started cluster: its nodes, and the link proxy in front of it, if any."""

    alias: str
    nodes: list[BrokerProcess]
    # The link proxy's process (`ferry.local.link_proxy.LinkProcessHandle.to_json()`), or None.
    link: dict[str, Any] | None = field(default=None)

    # -- what a client needs ------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """Every node's address, straight (not through the link)."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def link_bootstrap(self) -> str:
        """Every node's address through the link proxy: what a client in the other datacenter
        uses."""
        if not self.link:
            raise LocalClusterError(
                f"cluster {self.alias} has no link proxy (start it with --link-proxy)"
            )
        return ",".join(f"127.0.0.1:{node.proxy_port}" for node in self.nodes)

    @property
    def client(self) -> dict[str, str]:
        return {**self.nodes[0].client, "bootstrap.servers": self.bootstrap}

    @property
    def admin(self) -> dict[str, str]:
        first = self.nodes[0].admin
        return {**first, "bootstrap.servers": self.bootstrap} if first else {}

    @property
    def client_settings(self) -> dict[str, str]:
        """librdkafka settings for ferry's clients, bootstrap.servers included."""
        return self.client

    @property
    def admin_settings(self) -> dict[str, str]:
        """librdkafka settings of a principal allowed everything (the client's when plain)."""
        return self.admin or self.client

    @property
    def security(self) -> str:
        return self.nodes[0].security

    # -- a single-node cluster reads as its broker (what callers knew before nodes) ------
    @property
    def pid(self) -> int:
        return self.nodes[0].pid

    @property
    def port(self) -> int:
        return self.nodes[0].port

    @property
    def controller_port(self) -> int:
        return self.nodes[0].controller_port

    @property
    def directory(self) -> str:
        return self.nodes[0].directory

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(f"node {n.node_id}: {n.log_tail(lines)}" for n in self.nodes)

    # -- nodes ---------------------------------------------------------------------------
    def node(self, node_id: int) -> BrokerProcess:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        ids = ", ".join(str(n.node_id) for n in self.nodes)
        raise LocalClusterError(f"cluster {self.alias} has no node {node_id} (its nodes: {ids})")

    def is_running(self) -> bool:
        """True while every node runs."""
        return all(node.is_running() for node in self.nodes)

    def any_running(self) -> bool:
        return any(node.is_running() for node in self.nodes)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every node at once: one by one, the last nodes would wait out their
        controlled shutdown for a quorum that has already gone."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            for result in [pool.submit(node.stop, timeout) for node in self.nodes]:
                result.result()

    def kill(self) -> None:
        """SIGKILL every node, as the loss of a datacenter would."""
        for node in self.nodes:
            node.kill()

    def restart(self, *, heap: str = "1g", timeout: float = 120.0) -> None:
        """Start again every node that is not running, on its ports and data; wait until the
        cluster answers with all its brokers."""
        dead = [node for node in self.nodes if not node.is_running()]
        _wait_until_ready(self, {n.node_id: (n, launch(n, heap=heap)) for n in dead}, timeout)

    def start_node(self, node_id: int, *, heap: str = "1g", timeout: float = 120.0) -> None:
        """Start one stopped or killed node again and wait until the cluster lists it."""
        node = self.node(node_id)
        if node.is_running():
            raise LocalClusterError(
                f"node {node_id} of cluster {self.alias} (pid {node.pid}) is still running"
            )
        _wait_until_ready(self, {node_id: (node, launch(node, heap=heap))}, timeout)

    def signal_node(self, node_id: int, sig: signal.Signals) -> None:
        """KILL and TERM end a node (and wait until it is gone); STOP freezes it, CONT wakes it."""
        node = self.node(node_id)
        if sig == signal.SIGKILL:
            node.kill()
        elif sig == signal.SIGTERM:
            node.stop()
        else:
            node.send(sig)

    def to_json(self) -> dict[str, object]:
        # `client` and `admin` repeat what `ferry local up --json` printed, whole-cluster
        # bootstrap included, for whoever reads the state file; `from_json` reads the nodes.
        return {
            "alias": self.alias,
            "client": self.client,
            "admin": self.admin,
            "nodes": [node.to_json() for node in self.nodes],
            "link": self.link,
        }

    @staticmethod
    def from_json(alias: str, raw: Mapping[str, Any]) -> LocalCluster:
        if "nodes" not in raw:  # a state file written before clusters had nodes
            return LocalCluster(alias, [BrokerProcess(**raw)])
        return LocalCluster(
            alias, [BrokerProcess(**node) for node in raw["nodes"]], raw.get("link")
        )


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def start_cluster(
    alias: str,
    directory: Path,
    nodes: int,
    overrides: Mapping[str, str],
    *,
    heap: str,
    timeout: float,
    link: bool = False,
    client: Mapping[str, str] | None = None,
) -> LocalCluster:
    """Format and start `nodes` nodes of one plaintext cluster under `directory/node-N`, all
    at once (a quorum needs its majority up to elect a leader), and wait until the cluster
    answers with every broker."""
    if nodes < 1:
        raise LocalClusterError(f"cluster {alias}: --brokers must be at least 1, not {nodes}")
    controllers = 3 if nodes >= 3 else 1
    plans = [
        NodePlan.pick(n, "broker,controller" if n <= controllers else "broker", link=link)
        for n in range(1, nodes + 1)
    ]
    voters = ",".join(
        f"{p.node_id}@127.0.0.1:{p.controller_port}" for p in plans if p.controller_port
    )
    settings = {**replication_settings(nodes), **overrides}
    cluster_id = _cluster_id()
    # Formatting is a JVM start per node: in parallel.
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        members = list(
            pool.map(
                lambda plan: prepare_node(
                    alias,
                    directory / f"node-{plan.node_id}",
                    plan,
                    settings,
                    cluster_id=cluster_id,
                    voters=voters,
                    client=client,
                ),
                plans,
            )
        )
    cluster = LocalCluster(alias, members)
    starting = {node.node_id: (node, launch(node, heap=heap)) for node in members}
    try:
        _wait_until_ready(cluster, starting, timeout)
    except LocalClusterError:
        for node in members:
            with contextlib.suppress(LocalClusterError):
                node.kill()
        raise
    return cluster


def _wait_until_ready(
    cluster: LocalCluster,
    starting: Mapping[int, tuple[BrokerProcess, subprocess.Popen[bytes]]],
    timeout: float,
) -> None:
    """Until each starting node answers a metadata request on its own listener, listing itself
    and every other node that should run. The cluster's answer alone is not enough: a killed
    node stays listed until the controller fences it, seconds after it died."""
    expected = {n.node_id for n in cluster.nodes if n.node_id in starting or n.is_running()}
    waiting = set(starting)
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    last_error = "no answer yet"
    while time.monotonic() < deadline:
        for node, process in starting.values():
            if process.poll() is not None:
                raise LocalClusterError(
                    f"node {node.node_id} of cluster {cluster.alias} exited with code "
                    f"{process.returncode} while starting; last lines of its log "
                    f"({node.directory}):\n{node.log_tail()}"
                )
        for node_id in sorted(waiting):
            node = starting[node_id][0]
            # A fresh client each time: its first request goes to the node itself, where a
            # client that has learned the cluster asks any broker.
            admin = clients.admin_client(
                {**cluster.admin_settings, "bootstrap.servers": node.bootstrap, "log_level": 0}
            )
            try:
                metadata = admin.list_topics(timeout=2)
            except Exception as exc:  # KafkaException until the node is up
                last_error = str(exc)
                continue
            seen = set(metadata.brokers)
            answered_by = str(metadata.orig_broker_name).split("/")[0]
            if answered_by == node.bootstrap and expected <= seen:
                waiting.discard(node_id)
        if not waiting:
            return
        time.sleep(0.2)
    missing = ", ".join(str(n) for n in sorted(waiting))
    raise LocalClusterError(
        f"cluster {cluster.alias}: node(s) {missing} not listed by a metadata request on "
        f"{cluster.bootstrap} within {timeout:.0f}s ({last_error}); logs under "
        f"{Path(cluster.nodes[0].directory).parent}"
    )
