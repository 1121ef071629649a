"""Replication across a wide-area link: a delay-and-bandwidth proxy in front of one cluster.

`model` is the link's arithmetic (no I/O), `link` the asyncio proxy, `clusters` two local
clusters with a listener reached through the proxy, and `python -m bench.wan` the benchmark.
"""
