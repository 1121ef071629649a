"""Two local clusters A and B, each with an extra listener `WAN` that is reached through a
link proxy (`bench.wan.link`).

Each broker listens for `WAN` on its own port Q and advertises it at the proxy's port P, so a
client that bootstraps through P is told P for every broker and never goes around the link.
The usual `PLAINTEXT` listener stays on loopback for everything in the same datacenter (the
benchmark's producer and readers, the replicator's local side). Nothing listens on P until a
link is started there (`bench.wan.link`).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ferry.local.broker import BrokerProcess, free_port, start_broker

__all__ = ["WanCluster", "WanClusters", "wan_clusters", "wan_overrides"]

LISTENER = "WAN"


def wan_overrides(listen_port: int, advertised_port: int) -> dict[str, str]:
    """server.properties overrides adding the `WAN` listener ({port} and {controller_port}
    are filled in by `start_broker`)."""
    return {
        "listeners": (
            "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
            f"{LISTENER}://127.0.0.1:{listen_port}"
        ),
        "advertised.listeners": (
            "PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
            f"{LISTENER}://127.0.0.1:{advertised_port}"
        ),
        "listener.security.protocol.map": (
            f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{LISTENER}:PLAINTEXT"
        ),
    }


@dataclass
class WanCluster:
    broker: BrokerProcess
    wan_port: int  # the broker's WAN listener (Q)
    link_port: int  # where the link listens and what the broker advertises (P)
    settings: Mapping[str, str]  # the broker settings given beyond the WAN listener

    @property
    def local(self) -> str:
        """Bootstrap within the cluster's own datacenter."""
        return self.broker.bootstrap

    @property
    def remote(self) -> str:
        """Bootstrap from the other datacenter: through the link."""
        return f"127.0.0.1:{self.link_port}"


@dataclass
class WanClusters:
    a: WanCluster
    b: WanCluster


def _ports() -> tuple[int, int]:
    wan, link = free_port(), free_port()
    while link == wan:
        link = free_port()
    return wan, link


@contextlib.contextmanager
def wan_clusters(
    directory: Path,
    settings: Mapping[str, Mapping[str, str]] | None = None,
    heap: str = "1g",
) -> Iterator[WanClusters]:
    """Fresh clusters A and B under `directory`, always stopped again; `settings` are extra
    broker settings per alias."""
    settings = settings or {}
    started: list[BrokerProcess] = []
    try:
        clusters = []
        for alias in ("A", "B"):
            wan, link = _ports()
            extra = dict(settings.get(alias, {}))
            broker = start_broker(
                alias, directory / alias, {**wan_overrides(wan, link), **extra}, heap=heap
            )
            started.append(broker)
            clusters.append(WanCluster(broker, wan, link, extra))
        yield WanClusters(*clusters)
    finally:
        for broker in started:
            with contextlib.suppress(Exception):
                broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
