"""The `ferry` command line. Thin: parse options, call the library, print, pick the exit code.

Errors ferry raises on purpose (FerryError) are printed as one clear message and exit 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ferry.cli.api_commands import flows_app, topics_app
from ferry.cli.cluster_commands import pack, spark_app
from ferry.errors import FerryError
from ferry.secrets import HIDDEN
from ferry.terminal.console import err, make_console, out, styled

__all__ = ["app", "main"]

app = typer.Typer(
    help="ferry: Kafka cross-datacenter replication and disaster recovery, on Apache Spark.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
local_app = typer.Typer(help="Real Apache Kafka (KRaft) clusters on 127.0.0.1, for trying ferry.")
app.add_typer(local_app, name="local")
local_app.add_typer(spark_app, name="spark")
app.command("pack")(pack)
app.add_typer(topics_app, name="topics")
app.add_typer(flows_app, name="flows")


ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="ferry.yaml or MM2 .properties")]
DirOption = Annotated[
    Path | None,
    typer.Option("--dir", help="Where clusters keep data and logs [default: ./.ferry-local]"),
]


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


@app.command()
def validate(config: ConfigOption) -> None:
    """Check a config file and print what ferry will do with it."""
    cfg = _load(config)
    for key in cfg.ignored_keys:
        err.print(
            styled(
                ("note", "yellow"),
                f": {config}: key '{key}' only matters to MirrorMaker, "
                "Kafka Connect or Java clients; ignored",
            )
        )
    _print_notes(cfg)
    _check_topology(cfg, config, "valid")
    out.print(f"{config}: valid")
    out.print(
        f"  clusters: {', '.join(f'{a} ({c.bootstrap_servers})' for a, c in cfg.clusters.items())}"
    )
    for flow in cfg.flows:
        state = "enabled" if flow.enabled else "disabled"
        topics = _quoted(flow.topics)
        out.print(
            f"  flow {flow.name}: {state}, policy {flow.policy.kind}, topics {topics}, "
            f"exactly-once {'on' if flow.exactly_once else 'off'}"
        )
    out.print(f"  state dir: {cfg.state_dir}")
    if cfg.secrets:
        sources = (
            f"{key} ({', '.join(refs) if refs else 'in the file'})"
            for key, refs in sorted(cfg.secrets.items())
        )
        out.print(f"  secrets (printed as {HIDDEN}): {', '.join(sources)}")
    _print_control_state(cfg)


def _print_control_state(cfg: Any) -> None:
    """What the API changed (topics, pause), as the control topic keeps it for the next start."""
    from ferry.control.controller import describe
    from ferry.control.log import ControlLog

    api = cfg.api
    if api.control_cluster is None:
        out.print("  control state: not kept (set api.control.cluster to keep API changes)")
        return
    log = ControlLog(cfg.clusters[api.control_cluster], api.control_topic, timeout=5)
    try:
        saved = log.read()
    except FerryError as exc:
        err.print(f"note: could not read the control state: {exc}")
        return
    where = f"{api.control_topic} on {api.control_cluster}"
    changed = {name: c for name, c in saved.items() if not c.empty}
    if not changed:
        out.print(f"  control state ({where}): no change made over the API")
    for name, control in sorted(changed.items()):
        out.print(f"  control state ({where}): flow {name}: {describe(control)}")


def _check_topology(cfg: Any, config: Path, command: str) -> Any:
    """Print the graph's warnings and errors; exit 1 if it has errors (see ferry.graph.check)."""
    from ferry.cli.topology_view import print_findings
    from ferry.graph.check import check_config

    report = check_config(cfg)
    print_findings(err, report, config)
    if not report.ok:
        err.print(
            f"{config}: not {command}: {len(report.errors)} route(s) above would copy records "
            f"twice or forever; change the flows' topics, topics.exclude or policy "
            f"(ferry topology -c {config} shows the graph)"
        )
        raise typer.Exit(1)
    return report


def _print_notes(cfg: Any) -> None:
    for note in cfg.notes:
        err.print(styled(("note", "yellow"), f": {cfg.path}: {note}"))


def _quoted(patterns: tuple[str, ...]) -> str:
    """A regex list as the user wrote it: each item quoted, nothing escaped."""
    return "[" + ", ".join(f"'{p}'" for p in patterns) + "]"


@app.command()
def run(
    config: ConfigOption,
    once: Annotated[
        bool,
        typer.Option("--once", help="Copy everything available at start, then exit 0"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Serve Prometheus /metrics and /healthz on 127.0.0.1:PORT (0: any)"),
    ] = None,
    api_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the control API (topics, pause, failover) and its web console on PORT "
            "(0: any)"
        ),
    ] = None,
    api_host: Annotated[
        str, typer.Option(help="Where the API listens; not loopback only with a token")
    ] = "127.0.0.1",
) -> None:
    """Replicate every enabled flow (one Spark streaming query each) until stopped."""
    from ferry.control.controller import Controller
    from ferry.engine.runner import Runner
    from ferry.terminal.progress_view import ProgressView, summary_table

    cfg = _load(config)
    _print_notes(cfg)
    _check_topology(cfg, config, "started")
    for flow in cfg.enabled_flows:
        err.print(
            f"flow {flow.name}: {cfg.clusters[flow.source].bootstrap_servers} -> "
            f"{cfg.clusters[flow.target].bootstrap_servers}"
        )
    from ferry.api.events import Events

    events = Events()  # what the web console shows of the lines below

    def notice(line: str) -> None:
        err.print(line)
        events.add(line)

    controller = Controller.of(cfg, notice)
    controller.restore()  # what the API last said, before anything copies
    with ProgressView(err) as view:
        runner = Runner(
            cfg,
            once=once,
            on_progress=view.update,
            on_notice=notice,
            metrics_port=metrics_port,
            keep_failed=api_port is not None,  # a failed flow stays, for the API to show
        )
        api = None
        if api_port is not None:
            from ferry.api.server import serve

            api = serve(
                cfg,
                controller,
                runner.flow_conditions,
                api_host,
                api_port,
                restart=runner.restart,
                events=events,
            )
            err.print(
                f"API on {api.url} (OpenAPI document: {api.url}/openapi.json); "
                f"web console: {api.url}/"
            )
        try:
            flows = runner.run()
        finally:
            if api is not None:
                api.stop()
            controller.close()
    if as_json:
        print(
            json.dumps(
                {
                    p.name: {
                        "records": p.records,
                        "bytes": p.bytes,
                        "skipped": p.skipped,
                        "seconds": round(p.seconds, 3),
                        "copier": p.copier,
                    }
                    for p in flows
                }
            )
        )
    else:
        out.print(summary_table(flows))


@app.command()
def topology(
    config: ConfigOption,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw the graph into this PNG file")
    ] = None,
) -> None:
    """Print the replication graph (clusters, flows, policies, topics) with its warnings and
    errors; exits 1 if a route would copy records twice or forever."""
    from ferry.cli.topology_view import draw_png, print_findings, print_graph
    from ferry.graph.check import check_config

    cfg = _load(config)
    report = check_config(cfg)
    print_graph(out, cfg)
    print_findings(err, report, config)
    if png is not None:
        draw_png(cfg, report, png)
        out.print(f"drawn: {png}")
    out.print(f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)")
    if not report.ok:
        raise typer.Exit(1)


GroupOption = Annotated[str, typer.Option("--group", "-g", help="Consumer group id")]
FromOption = Annotated[str, typer.Option("--from", help="Cluster alias the group leaves")]
ToOption = Annotated[str, typer.Option("--to", help="Cluster alias the group moves to")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")]
CheckpointsOption = Annotated[
    bool,
    typer.Option(
        "--from-checkpoints",
        help="Use the checkpoints in --to even if --from answers (as when it is lost)",
    ),
]


@app.command()
def translate(
    config: ConfigOption,
    group: GroupOption,
    from_alias: FromOption,
    to_alias: ToOption,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
) -> None:
    """Print where a consumer group would resume on another cluster, per partition."""
    from ferry.offsets.failover import plan_failover

    cfg = _load(config)
    control = _recorded_control(cfg, from_alias, to_alias)
    plan = plan_failover(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    _print_plan(plan, as_json)


def _recorded_control(cfg: Any, from_alias: str, to_alias: str) -> Any:
    """What the API changed about the flow (topics added or removed), if it is recorded."""
    from ferry.control.log import recorded_control

    try:
        return recorded_control(cfg, from_alias, to_alias)
    except FerryError as exc:
        err.print(
            f"note: could not read the control state ({exc}); topics added or removed over "
            "the API count as the config file says"
        )
        return None


@app.command()
def failover(
    config: ConfigOption,
    group: GroupOption,
    from_alias: FromOption,
    to_alias: ToOption,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show, do not commit")] = False,
    as_json: JsonOption = False,
    from_checkpoints: CheckpointsOption = False,
    by_timestamp: Annotated[
        bool,
        typer.Option(
            "--by-timestamp",
            help="Seek by the timestamps the group recorded in __consumer_timestamps "
            "(re-delivers the last record consumed) instead of exact translation",
        ),
    ] = False,
) -> None:
    """Commit a consumer group's translated offsets on another cluster (failover, failback)."""
    from ferry.offsets.failover import apply_failover, plan_failover, plan_failover_by_timestamp

    cfg = _load(config)
    control = _recorded_control(cfg, from_alias, to_alias)
    planner = plan_failover_by_timestamp if by_timestamp else plan_failover
    plan = planner(
        cfg, group, from_alias, to_alias, from_checkpoints=from_checkpoints, control=control
    )
    if not dry_run:
        apply_failover(cfg, plan)
    _print_plan(plan, as_json)
    if not as_json:
        if plan.committed:
            out.print(f"committed group {group} on {to_alias}: start its consumers there")
        else:
            out.print("dry run: nothing was committed")


def _print_plan(plan: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(plan.as_json()))
        return
    from rich.table import Table

    table = Table(
        title=f"group {plan.group}: {plan.from_alias} -> {plan.to_alias} "
        f"(from {'checkpoints' if plan.source == 'checkpoints' else plan.from_alias})"
    )
    for column in ("topic", "partition", "committed", "to topic", "offset", "how"):
        table.add_column(
            column, justify="right" if column in ("partition", "committed", "offset") else "left"
        )
    for p in plan.positions:
        how = p.via if p.match in ("exact", "checkpoint") else f"{p.via} ({p.match})"
        table.add_row(
            p.topic, str(p.partition), str(p.committed), p.target_topic, str(p.offset), how
        )
    out.print(table)
    for topic, partition, offset in plan.not_replicated:
        err.print(
            f"{topic} partition {partition} (committed {offset}): not replicated to "
            f"{plan.to_alias}; left alone",
            highlight=False,
        )
    for notice in plan.notices:
        err.print(f"note: {notice}", highlight=False, markup=False)
    if plan.target_state.active:
        err.print(
            f"note: group {plan.group} has {len(plan.target_state.members)} active member(s) "
            f"on {plan.to_alias}",
            highlight=False,
        )


@app.command()
def status(config: ConfigOption, as_json: JsonOption = False) -> None:
    """Per flow, read from the clusters: heartbeat latency, replicated position and lag per
    partition; records and bytes copied by this machine. Exits 1 if a cluster does not answer."""

    from ferry.ops.status import flow_status

    cfg = _load(config)
    flows = [flow_status(cfg, flow) for flow in cfg.enabled_flows]
    if as_json:
        print(json.dumps({"flows": {f.flow: f.to_json() for f in flows}}))
    else:
        _print_status(flows)
    if any(f.errors for f in flows):
        raise typer.Exit(1)  # a cluster did not answer: its figures are missing


def _print_status(flows: list[Any]) -> None:
    from rich.table import Table

    for f in flows:
        latency = "no heartbeat yet" if f.latency_ms is None else f"{f.latency_ms} ms"
        lag = "unknown" if f.lag is None else f"{f.lag:,}"
        table = Table(
            title=f"flow {f.flow}: latency {latency}, lag {lag}, "
            f"copied {f.records:,} records ({f.bytes:,} bytes)",
            title_justify="left",
        )
        for column in ("topic", "partition", "source end", "replicated", "lag"):
            table.add_column(column, justify="left" if column == "topic" else "right")
        for p in f.partitions:
            table.add_row(
                p.topic, str(p.partition), str(p.source_end), str(p.replicated), str(p.lag)
            )
        out.print(table)
        for name, e in f.executors.items():
            out.print(
                f"  executor {name} on {e['host']}: {len(e['partitions'])} partitions now, "
                f"{e['records_per_second']:,.0f} records/s, {e['records']:,} records copied"
            )
        if f.spark_ui:
            out.print(f"  Spark UI: {f.spark_ui}")
        for error in f.errors:
            err.print(f"flow {f.flow}: {error}")


@app.command()
def audit(
    config: ConfigOption,
    flow: Annotated[
        str | None,
        typer.Option(
            help="Audit this flow only, e.g. A->B, or a chain of flows end to end, A->B->C "
            "(A->C finds the chain) [default: every enabled flow]"
        ),
    ] = None,
    topics: Annotated[str, typer.Option(help="Source topics to audit (a regex)")] = ".*",
    since: Annotated[
        str | None,
        typer.Option(help="Records from this time on: ISO 8601, or a duration ago (2h)"),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(help="Records before this time: ISO 8601, or a duration ago (5m)"),
    ] = None,
    bucket: Annotated[str, typer.Option(help="Width of the time buckets (30s, 1m, 1h)")] = "1m",
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Write audit.json and audit.png (counts per bucket) here"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Compare every replicated topic with its copy, record by record (by the ferry.origin
    header), as a Spark batch job: missing, duplicated, foreign, expired and in-flight
    records, per topic and time bucket. Exits 0 when nothing is missing, 3 when something is."""
    import time

    from ferry.audit import diff, report
    from ferry.audit.chain import chain_flows
    from ferry.audit.spark_job import audit_flows
    from ferry.errors import ConfigError

    cfg = _load(config)
    try:
        bucket_ms = diff.parse_bucket(bucket)
        now_ms = int(time.time() * 1000)
        since_ms = None if since is None else diff.parse_time(since, now_ms)
        until_ms = None if until is None else diff.parse_time(until, now_ms)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    chains = [[f] for f in cfg.enabled_flows] if flow is None else [chain_flows(cfg.flows, flow)]
    results = audit_flows(
        cfg, chains, topics=topics, bucket_ms=bucket_ms, since_ms=since_ms, until_ms=until_ms
    )
    document = report.to_json(results, bucket_ms)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "audit.json").write_text(json.dumps(document, indent=2) + "\n")
        report.chart(results, bucket_ms, out_dir / "audit.png")
    if as_json:
        print(json.dumps(document))
    else:
        _print_audit(results)
        if out_dir is not None:
            out.print(f"wrote {out_dir / 'audit.json'} and {out_dir / 'audit.png'}")
    if report.has_missing(results):
        raise typer.Exit(3)


def _print_audit(results: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    from ferry.audit import report

    for name, topics in results.items():
        table = Table(title=f"flow {name}", title_justify="left", box=box.SIMPLE_HEAD)
        table.add_column("topic", overflow="fold")
        for column in (*report.COUNTS, "complete", "delay p50 / p99"):
            table.add_column(column.replace("_", " "), justify="right", no_wrap=True)
        for row in report.table_rows(topics):
            table.add_row(*row)
        # Counts are never cut short: wider than a narrow terminal rather than elided.
        wide = make_console()
        wide.width = max(wide.width, 120)
        wide.print(table)
        for t in topics:
            for kind in ("missing", "duplicated", "foreign"):
                ranges = getattr(t, f"{kind}_ranges")
                if not ranges:
                    continue
                where = t.remote_topic if kind == "foreign" else t.topic
                shown = ", ".join(
                    f"{r['partition']}:{r['first']}-{r['last']} ({r['count']:,})" for r in ranges
                )
                more = " (more left off)" if t.ranges_truncated else ""
                out.print(f"  {kind} in {where} (partition:offsets): {shown}{more}")


@app.command()
def doctor(config: ConfigOption, as_json: JsonOption = False) -> None:
    """Warn where a target cannot keep what it acknowledged (replicas, ISR, producer), and
    name each ACL ferry's principal lacks on a flow's source or target."""
    from ferry.ops.doctor import diagnose

    findings = diagnose(_load(config))
    if as_json:
        print(json.dumps({"warnings": [f.to_json() for f in findings]}))
        return
    for f in findings:
        where = f"cluster {f.cluster}" + (f", topic {f.topic}" if f.topic else "")
        out.print(f"warning: {where}: {f.detail} [{f.kind}]", highlight=False, markup=False)
    out.print(f"{len(findings)} warning(s)")


@app.command()
def monitor(
    config: ConfigOption,
    metrics_port: Annotated[
        int,
        typer.Option(help="Serve /metrics and /healthz on 127.0.0.1:PORT; 0 = any free port"),
    ] = 9464,
    webhook: Annotated[
        str | None,
        typer.Option(help="POST each alert and recovery as JSON to this http(s) URL"),
    ] = None,
    once: Annotated[
        bool,
        typer.Option("--once", help="Sample every flow once, print the offsets, exit"),
    ] = False,
) -> None:
    """Watch every enabled flow for sync delay (sliding-window rule); serve Prometheus metrics."""
    from ferry.monitor import service

    cfg = _load(config)
    if once:
        failed = False
        for flow, sample in service.sample_once(cfg):
            if isinstance(sample, FerryError):
                err.print(f"flow {flow.name}: {sample}", highlight=False, markup=False)
                failed = True
                continue
            if not sample.pairs:
                out.print(f"flow {flow.name}: no replicated topic", highlight=False)
            for p in sample.pairs:
                group = f" group {p.group}" if p.group is not None else ""
                out.print(
                    f"flow {flow.name} {p.kind.value}{group} {p.topic} partition {p.partition}: "
                    f"{flow.source} {p.a}, {flow.target} {p.b} ({p.remote_topic})",
                    highlight=False,
                    markup=False,
                )
        if failed:
            raise typer.Exit(1)
        return

    def ready(port: int) -> None:
        print(f"metrics: http://127.0.0.1:{port}/metrics  health: http://127.0.0.1:{port}/healthz")
        sys.stdout.flush()

    try:
        service.serve(cfg, port=metrics_port, webhook_url=webhook, on_ready=ready)
    except KeyboardInterrupt:  # a second Ctrl-C while a sample was waiting on a cluster
        err.print("interrupted")
        raise typer.Exit(130) from None


@app.command()
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


def _load(path: Path) -> Any:
    """The config at `path`; librdkafka's lines about its clusters then name them by alias."""
    from ferry.config import load_config
    from ferry.kafka.log import name_clusters

    cfg = load_config(path)
    name_clusters({alias: c.bootstrap_servers for alias, c in cfg.clusters.items()})
    return cfg


def main() -> None:
    from ferry.secrets import RedactingStream, install_log_redaction

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
