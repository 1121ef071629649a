"""The `ferry` command line (`app`), its console helpers and the live progress view."""

from ferry.cli.app import app, main

__all__ = ["app", "main"]
