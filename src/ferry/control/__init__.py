"""Changes to replication made while it runs: which topics a flow copies beyond (or despite)
its config file, and whether it is paused. The pure model (`FlowControl`), where it is kept
(the flow's state dir for the planner; a compacted topic so it survives restarts) and the
controller that applies a change (`Controller`)."""

from ferry.control.model import FlowControl

__all__ = ["FlowControl"]
