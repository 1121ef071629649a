"""Everything a flow's Spark code needs, as one JSON string passed through query options.

Spark pickles the planner and the sink to other Python processes (and, on a cluster, other
machines), which cannot read the config file; the spec carries the resolved settings instead.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig

__all__ = ["FlowSpec", "flow_state_dir"]


def flow_state_dir(state_dir: Path, flow: FlowConfig) -> Path:
    return state_dir / f"{flow.source}-to-{flow.target}"


class FlowSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    flow: FlowConfig
    source: ClusterConfig
    target: ClusterConfig
    state_dir: str  # this flow's directory: stats and the Spark checkpoint
    bins: int = 2  # Spark's default parallelism, used when the flow sets no `ferry.bins`
    leased: bool = False  # continuous copy in leases (not --once, ferry.lease.seconds > 0)
    run_id: str = ""  # one per `ferry run`: the gap between two leases is measured within one
    # On a cluster, where leased tasks ask the driver (engine/lease_signals.py), and its token;
    # empty: they read the state directory (a local master).
    signals_url: str = ""
    signals_token: str = ""

    @classmethod
    def of(
        cls,
        config: FerryConfig,
        flow: FlowConfig,
        bins: int = 2,
        leased: bool = False,
        run_id: str = "",
        signals: tuple[str, str] = ("", ""),
    ) -> FlowSpec:
        """`signals`: the driver's lease signals (url, token), on a cluster."""
        return cls(
            bins=bins,
            leased=leased,
            run_id=run_id,
            signals_url=signals[0],
            signals_token=signals[1],
            flow=flow,
            source=config.clusters[flow.source],
            target=config.clusters[flow.target],
            state_dir=str(flow_state_dir(config.state_dir.resolve(), flow)),
        )
