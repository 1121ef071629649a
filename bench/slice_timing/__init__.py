"""Timing of ferry's exactly-once slices, step by step (see sitecustomize.py)."""
