"""`ferry local up|down|provision` and `ferry demo`: real Kafka clusters on this machine, for
trying ferry."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Annotated

import typer

from ferry.cli.common import DirOption, JsonOption
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
    heap: Annotated[
        str,
        typer.Option(
            help="JVM heap per node; 1g holds about 10,000 partition replicas per node "
            "(1,000 topics x 10 partitions at RF 3 on 3 nodes), 512m ran out of heap there"
        ),
    ] = "1g",
    brokers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Nodes per cluster. From 3 on: a 3-node controller quorum and internal and "
            "new topics at replication factor 3 with min.insync.replicas 2",
        ),
    ] = 1,
    timeout: Annotated[
        float,
        typer.Option(help="Seconds to wait for each cluster to answer with all its nodes"),
    ] = 120.0,
    link_proxy: Annotated[
        bool,
        typer.Option(
            "--link-proxy",
            help="Put a link proxy in front of each cluster (its nodes advertise the proxy's "
            "ports on a LINK listener): `ferry local link` cuts, black-holes or delays it",
        ),
    ] = False,
    schema_registry: Annotated[
        bool,
        typer.Option(
            "--schema-registry",
            help="Also start one schema registry (Apicurio Registry, Confluent-compatible API) "
            "per cluster on 127.0.0.1; --json then prints each cluster's settings with "
            "schema.registry.url",
        ),
    ] = False,
) -> None:
    """Start one Kafka cluster (of --brokers nodes) per alias and wait until each answers."""
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
        brokers=brokers,
        link=link_proxy,
        timeout=timeout,
    )
    state_file = Path(directory or local.default_dir()) / local.STATE_FILE
    registries = {}
    if schema_registry:
        from ferry.local.schema_registry import start_registries

        where = Path(directory or local.default_dir()).resolve()
        registries = {a: r.url for a, r in start_registries(aliases, where).items()}
    if as_json:
        if schema_registry:
            print(
                json.dumps(
                    {
                        alias: {**b.client_settings, "schema.registry.url": registries[alias]}
                        for alias, b in started.items()
                    }
                )
            )
        elif security == "plaintext":
            print(json.dumps({alias: b.bootstrap for alias, b in started.items()}))
        else:
            print(json.dumps({alias: b.client_settings for alias, b in started.items()}))
        return
    for alias, cluster in started.items():
        pids = ", ".join(str(node.pid) for node in cluster.nodes)
        out.print(styled("cluster ", (alias, "bold"), f": {cluster.bootstrap}  (pid {pids})"))
        if cluster.link:
            out.print(f"  through its link proxy: {cluster.link_bootstrap}")
        if alias in registries:
            out.print(f"  schema registry: {registries[alias]}")
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


@local_app.command("nodes")
def local_nodes(directory: DirOption = None, as_json: JsonOption = False) -> None:
    """Every node of the clusters `ferry local up` started in DIR: cluster, node id, pid,
    listener, roles, and whether it runs; and their schema registries (node
    `schema-registry`, the registry's URL as its listener)."""
    from ferry.local import clusters as local

    rows = []
    for alias, cluster in local.read_state(directory or local.default_dir()).items():
        for node in cluster.nodes:
            row: dict[str, object] = {
                "cluster": alias,
                "node": node.node_id,
                "pid": node.pid if node.is_running() else None,
                "listener": node.bootstrap,
                "roles": node.roles.split(","),
                "alive": node.is_running(),
            }
            if node.proxy_port:
                row["link_listener"] = f"127.0.0.1:{node.proxy_port}"
            rows.append(row)
    from ferry.local.schema_registry import read_registries

    for alias, registry in read_registries((directory or local.default_dir()).resolve()).items():
        alive = registry.is_running()
        rows.append(
            {
                "cluster": alias,
                "node": "schema-registry",
                "pid": registry.pid if alive else None,
                "listener": registry.url,
                "roles": ["schema-registry"],
                "alive": alive,
            }
        )
    if as_json:
        print(json.dumps(rows))
        return
    if not rows:
        out.print("no local clusters")
    for row in rows:
        state = f"pid {row['pid']}" if row["alive"] else "DOWN"
        roles = "+".join(row["roles"])  # type: ignore[arg-type]  # a list, built above
        out.print(f"{row['cluster']} node {row['node']}  {row['listener']}  {roles}  {state}")


_SIGNALS = {
    "KILL": signal.SIGKILL,
    "TERM": signal.SIGTERM,
    "STOP": signal.SIGSTOP,
    "CONT": signal.SIGCONT,
}


@local_app.command("kill")
def local_kill(
    cluster: Annotated[str, typer.Option(help="Cluster alias")],
    node: Annotated[int, typer.Option(help="Node id (see ferry local nodes)")],
    sig: Annotated[
        str,
        typer.Option(
            "--signal",
            help="KILL (a crash), TERM (a clean shutdown), STOP (a frozen node: a GC pause, "
            "a suspended VM) or CONT (wake a stopped node)",
        ),
    ] = "KILL",
    directory: DirOption = None,
) -> None:
    """Signal one node of a local cluster, to rehearse a failure."""
    from ferry.errors import LocalClusterError
    from ferry.local import clusters as local

    if sig.upper() not in _SIGNALS:
        raise LocalClusterError(f"--signal '{sig}' is not one of {', '.join(_SIGNALS)}")
    local.kill_node(directory, cluster, node, _SIGNALS[sig.upper()])
    out.print(f"cluster {cluster} node {node}: sent SIG{sig.upper()}")


@local_app.command("start")
def local_start(
    cluster: Annotated[str, typer.Option(help="Cluster alias")],
    node: Annotated[int, typer.Option(help="Node id (see ferry local nodes)")],
    directory: DirOption = None,
    heap: Annotated[str, typer.Option(help="JVM heap of the node")] = "1g",
) -> None:
    """Start a killed or stopped node again on its ports and data; waits until it serves."""
    from ferry.local import clusters as local

    started = local.start_node(directory, cluster, node, heap=heap)
    out.print(f"cluster {cluster} node {node}: pid {started.node(node).pid}")


@local_app.command("link")
def local_link(
    cluster: Annotated[str, typer.Option(help="Cluster alias (started with --link-proxy)")],
    action: Annotated[
        str,
        typer.Argument(
            help="cut (reset every connection, refuse new ones), blackhole (no reset: bytes "
            "stop, as a dead link), delay (add --ms each way), restore, or status"
        ),
    ],
    ms: Annotated[float, typer.Option(help="Delay each way, for `delay`")] = 0.0,
    directory: DirOption = None,
) -> None:
    """Cut, black-hole, delay or restore the link to one local cluster."""
    from ferry.errors import LocalClusterError
    from ferry.local import clusters as local

    actions = {
        "cut": "cut",
        "blackhole": "blackhole",
        "delay": "open",
        "restore": "restore",
        "status": "status",
    }
    if action not in actions:
        raise LocalClusterError(f"link action '{action}' is not one of {', '.join(actions)}")
    answer = local.link_command(
        directory, cluster, actions[action], ms if action == "delay" else None
    )
    print(json.dumps(answer))


@local_app.command("provision")
def local_provision(
    schema_registry: Annotated[
        bool,
        typer.Option("--schema-registry", help="Also fetch Apicurio Registry (the local registry)"),
    ] = False,
    yarn: Annotated[
        bool,
        typer.Option("--yarn", help="Also fetch Hadoop's minicluster jars (ferry local yarn)"),
    ] = False,
) -> None:
    """Download the pinned Apache Kafka jars and Spark's Kafka connector from Maven Central
    (or $FERRY_MAVEN_REPOSITORY) into the cache, each file checked against its pinned SHA-256
    (once)."""
    from ferry.local.distribution import KAFKA_VERSION, ensure_kafka
    from ferry.local.spark_kafka import SPARK_KAFKA_VERSION, ensure_spark_kafka

    home = ensure_kafka(quiet=False)
    out.print(f"Apache Kafka {KAFKA_VERSION}: {home}")
    connector = ensure_spark_kafka(quiet=False)
    out.print(f"Spark's Kafka connector {SPARK_KAFKA_VERSION}: {connector}")
    if schema_registry:
        from ferry.local.schema_registry import APICURIO_VERSION, ensure_apicurio

        registry = ensure_apicurio(quiet=False)
        out.print(f"Apicurio Registry {APICURIO_VERSION}: {registry}")
    if yarn:
        from ferry.local.yarn import HADOOP_VERSION, ensure_minicluster

        hadoop = ensure_minicluster(quiet=False)
        out.print(f"Hadoop {HADOOP_VERSION} minicluster (YARN and HDFS): {hadoop}")


def demo(
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir", help="Where the demo's clusters keep data and logs (default ./.ferry-demo)"
        ),
    ] = None,
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
