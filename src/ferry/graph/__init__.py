"""The replication graph, pure: which source topics a flow copies (`selection.py`), the
replication hops read off heartbeats topic names (`hops.py`), the graph as a whole checked
for double routes and unsafe cycles (`check.py`), and which hop to hold back while running
(`guard.py`)."""
