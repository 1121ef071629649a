"""The `ferry` command line (`app`, and `main`, its entry point): the commands by concern,
registered in cli/app.py. It parses and prints; `ferry run` itself is `ferry.service.run`."""

from ferry.cli.app import app, main

__all__ = ["app", "main"]
