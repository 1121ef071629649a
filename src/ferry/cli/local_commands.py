"""`ferry local up|down|provision` and `ferry demo`: real Kafka clusters on this machine, for
trying ferry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ferry.cli.common import DirOption
from ferry.terminal.console import err, out, styled

__all__ = ["demo", "local_app"]

local_app = typer.Typer(help="Real Apache Kafka (KRaft) clusters on 127.0.0.1, for trying ferry.")


@local_app.command("up")
def local_up(
    clusters: Annotated[str, typer.Option(help="Comma-separated cluster aliases")] = "A,B",
    directory: DirOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print {alias: bootstrap} only; with --security, {alias: {client settings}}",
        ),
    ] = False,
    security: Annotated[
        str,
        typer.Option(
            help="plaintext; sasl_ssl (TLS + SCRAM-SHA-512 users 'admin' and 'ferry', ACLs); "
            "ssl (mutual TLS, the same two principals by certificate)",
        ),
    ] = "plaintext",
    broker_settings: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Broker setting KEY=VALUE for all clusters, or ALIAS:KEY=VALUE for one "
            "(values may use {port} and {controller_port}). Repeatable.",
        ),
    ] = None,
    client_settings: Annotated[
        list[str] | None,
        typer.Option(
            "--client",
            help="librdkafka setting KEY=VALUE (or ALIAS:KEY=VALUE) a client needs to reach the "
            "brokers, e.g. SASL credentials; used to check they answer. Repeatable.",
        ),
    ] = None,
    heap: Annotated[str, typer.Option(help="JVM heap per broker")] = "512m",
) -> None:
    """Start one single-node Kafka cluster per alias and wait until each answers."""
    from ferry.errors import LocalClusterError
    from ferry.local import clusters as local
    from ferry.local.security import MODES

    if security not in MODES:
        raise LocalClusterError(f"--security '{security}' is not one of {', '.join(MODES)}")
    aliases = [a.strip() for a in clusters.split(",") if a.strip()]
    overrides = local.parse_cluster_settings(broker_settings or [], aliases)
    clients = local.parse_cluster_settings(client_settings or [], aliases, "client setting")
    started = local.up(
        aliases,
        directory,
        overrides,
        heap=heap,
        clients=clients,
        security=security,  # type: ignore[arg-type]  # checked against MODES above
    )
    state_file = Path(directory or local.default_dir()) / local.STATE_FILE
    if as_json:
        if security == "plaintext":
            print(json.dumps({alias: b.bootstrap for alias, b in started.items()}))
        else:
            print(json.dumps({alias: b.client_settings for alias, b in started.items()}))
        return
    for alias, broker in started.items():
        out.print(styled("cluster ", (alias, "bold"), f": {broker.bootstrap}  (pid {broker.pid})"))
    if security != "plaintext":
        out.print(
            f"security {security}: principal 'ferry' (the ACLs of a source and a target) and "
            f"'admin' (super user); their client settings are in {state_file}"
        )
    out.print(f"stop them with: ferry local down --dir {Path(directory or local.default_dir())}")


@local_app.command("down")
def local_down(
    directory: DirOption = None,
    keep_data: Annotated[bool, typer.Option(help="Keep data and logs")] = False,
) -> None:
    """Stop exactly the brokers `ferry local up` started in DIR."""
    from ferry.local import clusters as local

    stopped = local.down(directory, keep_data=keep_data)
    out.print(f"stopped: {', '.join(stopped)}" if stopped else "no running local clusters")


@local_app.command("provision")
def local_provision() -> None:
    """Fetch the pinned Apache Kafka jars and Spark's Kafka connector from Maven Central into
    the cache (once)."""
    from ferry.local.distribution import KAFKA_VERSION, ensure_kafka
    from ferry.local.spark_kafka import SPARK_KAFKA_VERSION, ensure_spark_kafka

    home = ensure_kafka(quiet=False)
    out.print(f"Apache Kafka {KAFKA_VERSION}: {home}")
    connector = ensure_spark_kafka(quiet=False)
    out.print(f"Spark's Kafka connector {SPARK_KAFKA_VERSION}: {connector}")


def demo(
    directory: DirOption = None,
    keep: Annotated[bool, typer.Option(help="Leave the clusters running afterwards")] = False,
    secure: Annotated[
        bool,
        typer.Option(
            help="Secure clusters (TLS, SCRAM-SHA-512, ACLs; ferry as a least-privileged "
            "principal), as `ferry local up --security sasl_ssl` starts them"
        ),
    ] = False,
) -> None:
    """Two local clusters, sample traffic, ferry replicating it live, explained."""
    from ferry.demo import run_demo

    try:
        run_demo(out, directory or Path(".ferry-demo"), keep=keep, secure=secure)
    except KeyboardInterrupt:  # a second Ctrl-C; run_demo has cleaned up already
        err.print("interrupted")
        raise typer.Exit(130) from None
