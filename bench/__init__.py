"""Benchmarks of ferry against MirrorMaker 2 and the brokers' own limit (`make bench`).

Run from the repository root: `python -m bench.compare` (the whole comparison) or
`python -m bench.engine_once` (ferry's `run --once` alone). Not part of `make test`.
"""
