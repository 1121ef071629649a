"""Changes to replication made while it runs: where they are kept (a compacted control topic,
so they survive restarts: `log.py`) and the controller that checks a change, records it and
makes the planner act on it (`controller.py`). The change itself, a flow's override, is the
shared type `ferry.flows.override.FlowControl`."""
