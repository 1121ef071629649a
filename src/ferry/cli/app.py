"""The `ferry` command line. Thin: parse options, call the library, print, pick the exit code.

Errors ferry raises on purpose (FerryError) are printed as one clear message and exit 1;
anything else is a bug and keeps its traceback. The commands live by concern in this package
(run_command, config_commands, offsets_commands, failover_commands, ops_commands, audit_command,
local_commands, api_commands, cluster_commands) and are registered here, in the order `ferry
--help` lists them.
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
from typing import Annotated

import typer

from ferry.cli.api_commands import flows_app, topics_app
from ferry.cli.audit_command import audit
from ferry.cli.cluster_commands import pack, spark_app, yarn_app
from ferry.cli.config_commands import topology, validate
from ferry.cli.failover_commands import failover_app
from ferry.cli.local_commands import demo, local_app
from ferry.cli.offsets_commands import translate
from ferry.cli.ops_commands import doctor, monitor, status
from ferry.cli.reconcile_command import reconcile
from ferry.cli.run_command import run
from ferry.cli.switchover_command import switchover
from ferry.errors import FerryError
from ferry.terminal.console import err, styled

__all__ = ["app", "main"]

app = typer.Typer(
    help="ferry: Kafka cross-datacenter replication and disaster recovery, on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        print(f"ferry {version('ferry')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print ferry's version and exit"
        ),
    ] = False,
) -> None:
    """ferry: Kafka cross-datacenter replication and disaster recovery, on Apache Spark."""


app.add_typer(local_app, name="local")
local_app.add_typer(spark_app, name="spark")
local_app.add_typer(yarn_app, name="yarn")
app.command("pack")(pack)
app.add_typer(topics_app, name="topics")
app.add_typer(flows_app, name="flows")
app.add_typer(failover_app, name="failover")
for _command in (
    validate,
    run,
    topology,
    translate,
    reconcile,
    switchover,
    status,
    audit,
    doctor,
    monitor,
    demo,
):
    app.command()(_command)


def main() -> None:
    from ferry.secrets import RedactingStream, install_log_redaction

    # `kill -USR1 <pid>` prints every thread's stack to stderr and ferry goes on: what a
    # process that seems stuck is waiting for (function names and lines only, no values).
    # The process's own stderr, not the stream the redaction wraps (or a test replaced).
    if sys.__stderr__ is not None:
        with contextlib.suppress(OSError, ValueError):  # no file descriptor behind it
            faulthandler.register(signal.SIGUSR1, file=sys.__stderr__.fileno(), all_threads=True)

    # Whatever this process prints or logs (ferry's lines, a library's, a traceback) passes
    # here, so no secret the config held reaches the console (see ferry.secrets).
    sys.stdout = RedactingStream(sys.stdout)
    sys.stderr = RedactingStream(sys.stderr)
    install_log_redaction()
    try:
        app()
    except FerryError as exc:
        err.print(styled(("error", "bold red"), f": {exc}"))
        sys.exit(1)
