"""`ferry run`: one Spark Structured Streaming query per enabled flow, watched until done.

The runner owns the Spark session and the queries. It turns a failed query back into the
ferry error that stopped it (see `ferry.errors.error_from_text`): a cluster that does not
answer is retried with backoff that starts over once the flow copies again (the query restarts
from its checkpoint, so nothing is lost or skipped), and said once per outage, not per attempt;
anything else stops every flow and is reported once, precisely. A `--once` run gives up on a
cluster that has not answered for `ferry.once.max.wait.seconds` and says which: a cron job must
end. With the control API (`keep_failed`), a continuous run instead keeps a failed flow as
`failed` with its error, for the API to show and restart, and copies on with the others; it
still exits 1 with that error when stopped.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ferry.config.model import FerryConfig, FlowConfig
from ferry.engine.flow_spec import FlowSpec, flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.engine.graph_watch import GraphWatch
from ferry.engine.head_start import HeadStart, head_start_spec
from ferry.engine.lease_signals import LeaseSignalServer
from ferry.engine.lease_watch import AssignmentWatch
from ferry.engine.plan.remote_topics import TopicManager
from ferry.engine.spark.cluster import environment_error
from ferry.engine.spark.cores import available_cores
from ferry.engine.spark.session import spark_master, start_spark
from ferry.errors import FerryError, KafkaUnavailableError, ReplicationError, error_from_text
from ferry.flows.status import Condition
from ferry.http.metrics_server import MetricsServer
from ferry.kafka.reachability import Reachability
from ferry.kafka.retry import Backoff, retry_unavailable
from ferry.policy import policy_for
from ferry.signals import stop_on_signals
from ferry.tasks.control_plane import ControlPlane
from ferry.tasks.heartbeats import ensure_heartbeats_topic

__all__ = ["FlowProgress", "Runner"]

# A restarted query that has run this long without failing counts as a success (a query that
# has nothing to copy reports no progress to tell by).
HEALTHY_AFTER_SECONDS = 30.0


@dataclass
class FlowProgress:
    """What the progress view and the summary show for one flow."""

    name: str
    records: int = 0
    bytes: int = 0
    skipped: int = 0  # records not copied back to the cluster they came from (loop prevention)
    expired: int = 0  # records the source deleted (retention) before ferry could copy them
    lag: int = 0
    seconds: float = 0.0
    records_per_second: float = 0.0
    mb_per_second: float = 0.0
    done: bool = False
    restarts: int = 0
    copier: str = ""  # the copy loop of the latest batch: native or python


@dataclass
class _Flow:
    flow: FlowConfig
    spec: FlowSpec
    state: FlowState
    query: Any = None
    started: float = 0.0
    baseline: dict[str, Any] | None = None  # the counters when this run began copying
    head: HeadStart | None = None  # the driver's copy while Spark started
    progress: FlowProgress = field(init=False)
    backoff: Backoff = field(default_factory=Backoff)
    retry_at: float | None = None
    healthy_at: float | None = None  # when a restarted query counts as working again
    down: KafkaUnavailableError | None = None  # why the flow waits, since `down_since`
    down_since: float = 0.0
    failed: FerryError | None = None  # why the flow stopped for good (kept: `keep_failed`)
    last_sample: tuple[float, int, int] = (0.0, 0, 0)
    errors: dict[str, int] = field(default_factory=dict)  # failures by kind, for metrics

    def __post_init__(self) -> None:
        self.progress = FlowProgress(self.flow.name)


def _share(cores: int, flows: int) -> int:
    """Each leased flow's share of Spark's cores: at least one while there is any (the flows
    take turns when there are fewer), 0 while no executor is registered."""
    return max(1, cores // max(1, flows)) if cores > 0 else 0


class Runner:
    def __init__(
        self,
        config: FerryConfig,
        *,
        once: bool = False,
        spark: Any = None,
        on_progress: Callable[[list[FlowProgress]], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        metrics_port: int | None = None,
        keep_failed: bool = False,
    ) -> None:
        if not config.enabled_flows:
            raise FerryError(
                f"{config.path or 'the config'} enables no flow; set e.g. "
                f"'{next(iter(config.clusters), 'A')}->B.enabled = true'"
            )
        self.config = config
        self.once = once
        self._spark = spark
        self._on_progress = on_progress or (lambda _p: None)
        self._notice = on_notice or (lambda _m: None)
        self._stopping = False
        self._metrics_port = metrics_port
        self._keep_failed = keep_failed and not once  # a --once run must end
        self.metrics_url: str | None = None  # set once the metrics endpoint is serving
        self._last_tick = time.monotonic()
        self._reach = Reachability()  # what the console last said of each cluster
        self._flows: list[_Flow] = []  # while running (the API asks how each flow is)
        self._signals: LeaseSignalServer | None = None  # on a cluster, while running

    # --- lifecycle --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after the current batch of every flow, as the first Ctrl-C does."""
        self._stopping = True

    def run(self) -> list[FlowProgress]:
        """Copy until done (`--once`) or stopped; SIGINT/SIGTERM stop after the current batch."""
        with stop_on_signals(self._stop_on_signal):
            progress = self._run()
        for f in self._flows:
            if f.failed is not None:
                raise f.failed  # kept for the API while running; still the run's exit
        return progress

    def flow_conditions(self) -> dict[str, Condition]:
        """Per running flow, why it does not copy now: a cluster that does not answer, or an
        error that stopped it."""
        return {
            f.flow.name: Condition(
                unavailable=str(f.down) if f.down else None,
                failed=str(f.failed) if f.failed else None,
            )
            for f in list(self._flows)
        }

    def restart(self, name: str) -> bool:
        """Start a failed flow again (from its position, as any restart); False if the flow
        has not failed. Called from the API's thread: the watch loop starts the query."""
        for f in list(self._flows):
            if f.flow.name == name and f.failed is not None:
                f.backoff.reset()
                f.retry_at = time.monotonic()
                f.failed = None
                self._notice(f"flow {name}: restarted over the API")
                return True
        return False

    def _stop_on_signal(self) -> None:
        self._stopping = True
        self._notice("stopping after the current batch (Ctrl-C again to stop now)")

    def _run(self) -> list[FlowProgress]:
        flows: list[_Flow] = self._flows
        server: MetricsServer | None = None
        control: ControlPlane | None = None
        watch: AssignmentWatch | None = None
        graph: GraphWatch | None = None
        spark: Any = None
        head_starts: list[HeadStart] = []
        signals: LeaseSignalServer | None = None
        archive: Any = None  # the class archive this run's JVM writes at exit, if any
        try:
            # Clusters first: an unreachable or misconfigured one is reported before Spark
            # spends seconds starting.
            for flow in self.config.enabled_flows:
                self._prepare(flow)
                self._check_copier(flow)
            # The graph over real topics, before anything copies (the head start included).
            root = self.config.state_dir.resolve()
            graph = GraphWatch(
                self.config,
                {f.name: FlowState(flow_state_dir(root, f)) for f in self.config.enabled_flows},
                self._notice,
            )
            graph.check()
            run_id = uuid.uuid4().hex
            early = self._head_start(run_id)
            head_starts = [head for head, _baseline, _started in early.values()]
            if self._spark is None:
                spark, archive = start_spark(
                    self.config, write_class_archive=True, notice=self._notice
                )
            else:
                spark = self._spark
            spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
            from ferry.engine.spark.source import MirrorDataSource

            spark.dataSource.register(MirrorDataSource)
            # Executors still registering count as Spark's default parallelism, until the
            # lease watch counts them.
            cores = available_cores(spark) or int(spark.sparkContext.defaultParallelism)
            leased = [f for f in self.config.enabled_flows if f.leased and not self.once]
            if leased and not self._local_master():
                signals = self._signals = _serve_lease_signals(spark, root, leased)
                self._notice(f"leased tasks ask ferry run at {signals.url} (lease signals)")
            asks = (signals.url, signals.token) if signals else ("", "")
            for flow in self.config.enabled_flows:
                # Leases hold their cores for the whole lease: the flows share them out.
                bins = _share(cores, len(leased)) if flow in leased else cores
                spec = FlowSpec.of(
                    self.config,
                    flow,
                    bins=bins,
                    leased=flow in leased,
                    run_id=run_id,
                    signals=asks if flow in leased else ("", ""),
                )
                flows.append(_Flow(flow, spec, FlowState(spec.state_dir)))
                if flow.name in early:  # counted from before the head start copied
                    flows[-1].head, flows[-1].baseline, flows[-1].started = early[flow.name]
            ui = spark.sparkContext.uiWebUrl  # None unless spark.ui.enabled = true
            if ui:
                self._notice(f"Spark UI: {ui}")
            for f in flows:
                f.state.write_spark_ui(ui)
            if len(leased) > cores:
                self._notice(
                    f"{len(leased)} flows copy in leases, each holding a core, but Spark has "
                    f"{cores}: the flows take turns, a lease ({leased[0].lease_seconds} s) "
                    "at a time. Give Spark a core per flow (spark.master = local[N]) or set "
                    "ferry.lease.seconds = 0 (bounded micro-batches share the cores)"
                )
            server = self._serve_metrics(flows)
            leases = [(f.flow, f.state) for f in flows if f.spec.leased]
            watch = AssignmentWatch(
                self.config,
                leases,
                lambda: self._stopping,
                slots=lambda: _share(available_cores(spark), len(leases)),
                notice=self._notice,
            )
            watch.check_slots()  # before the first lease is planned: a last run's is stale
            for f in flows:
                self._start(spark, f)
            watch.start()
            if not self.once:
                graph.start()
            states = {f.flow.name: f.state for f in flows}
            control = plane = ControlPlane(
                self.config, self._notice, self._reach, lambda flow: states[flow.name].control()
            )
            if not self.once:
                plane.start()
            self._watch(spark, flows)
            if self.once and not self._stopping:
                # After copying: checkpoints (and group sync) as of now, then exit.
                self._retrying(plane.run_once)
        finally:
            for head in head_starts:
                head.stop()
            if head_starts and flows:
                self._update_progress(flows)  # what a head start copied after the last look
            if watch is not None:
                watch.stop()
            if graph is not None:
                graph.stop()
            if control is not None:
                control.stop()
            if server is not None:
                server.stop()
            for f in flows:
                if f.query is not None and f.query.isActive:
                    f.query.stop()
            if signals is not None:
                signals.stop()  # after the queries: their leases ask it until they end
                self._signals = None
            if archive is not None and archive.pending is not None:
                archive.finish(spark)  # the next run's JVM starts faster
        return [f.progress for f in flows]

    def _head_start(self, run_id: str) -> dict[str, tuple[HeadStart, dict[str, Any], float]]:
        """Flows copied by the driver while Spark starts (engine/head_start.py), by name, with
        their counters and the time from before it copied anything."""
        if not self._local_master():
            return {}
        early: dict[str, tuple[HeadStart, dict[str, Any], float]] = {}
        for flow in self.config.enabled_flows:
            if not flow.head_start_enabled:
                continue
            spec = head_start_spec(self.config, flow, run_id)
            state = FlowState(spec.state_dir)
            state.stop_marker.unlink(missing_ok=True)  # left by an earlier run
            baseline, started = state.stats(), time.monotonic()
            early[flow.name] = (
                HeadStart(spec, lambda: self._stopping, self._notice).start(),
                baseline,
                started,
            )
        return early

    def _local_master(self) -> bool:
        if self._spark is not None:
            return str(self._spark.sparkContext.master).startswith("local")
        return spark_master(self.config).startswith("local")

    def _serve_metrics(self, flows: list[_Flow]) -> MetricsServer | None:
        if self._metrics_port is None:
            return None
        from prometheus_client import CollectorRegistry

        from ferry.engine.run_metrics import RunMetrics

        registry = CollectorRegistry()
        registry.register(RunMetrics(lambda: [(f.flow.name, f.state, f.errors) for f in flows]))
        # Healthy while the watch loop turns: a wedged driver fails its liveness probe.
        server = MetricsServer(registry, self._health, port=self._metrics_port).start()
        self.metrics_url = f"http://127.0.0.1:{server.port}/metrics"
        self._notice(
            f"metrics on {self.metrics_url}, health on http://127.0.0.1:{server.port}/healthz"
        )
        return server

    def _health(self) -> tuple[bool, str]:
        idle = time.monotonic() - self._last_tick
        if idle < 30:
            return True, "ok"
        return False, f"ferry run's driver loop has not turned for {idle:.0f}s"

    def _check_copier(self, flow: FlowConfig) -> None:
        """Say which copy loop runs when it is not the one a user would expect."""
        if flow.copier == "python" or flow.exactly_once:
            return
        from ferry.engine.copy.native_loop import native_module, unavailable_reason

        if native_module() is not None:
            return
        if flow.copier == "native":
            raise FerryError(
                f"flow {flow.name}: ferry.copier = native, but the native copy loop is not "
                f"available: {unavailable_reason()}. Fix: reinstall ferry where a C compiler "
                "is available (make setup), or set ferry.copier = auto"
            )
        self._notice(
            f"flow {flow.name}: copying with the Python loop (the native one is not "
            f"available: {unavailable_reason()})"
        )

    def _prepare(self, flow: FlowConfig) -> None:
        """The flow's offset-runs topic exists on the target (so both clusters answer)."""
        manager = TopicManager(
            flow, self.config.clusters[flow.source], self.config.clusters[flow.target]
        )
        policy = policy_for(flow.policy, flow.source)

        def ready() -> None:
            manager.cluster_ids()  # both clusters answer
            manager.ensure_internal_topic(
                policy.offset_runs_topic(flow.source), flow.offset_syncs_topic_replication_factor
            )
            if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
                manager.ensure_internal_topic(
                    policy.checkpoints_topic(flow.source),
                    flow.checkpoints_topic_replication_factor,
                    key="checkpoints.topic.replication.factor",
                )
            if flow.emit_heartbeats_enabled:
                # On the source before the first batch plans, so it is copied from the start.
                # A refusal (say, a replication factor above the broker count) only turns
                # heartbeats off; the control plane says so.
                with contextlib.suppress(ReplicationError):
                    ensure_heartbeats_topic(
                        self.config.clusters[flow.source],
                        policy.heartbeats_topic(),
                        flow.heartbeats_topic_replication_factor,
                    )

        self._retrying(ready)

    def _retrying(self, action: Callable[[], object]) -> None:
        """`action` until it works; an unanswering cluster is said once, then retried (in a
        `--once` run for at most `ferry.once.max.wait.seconds`)."""
        bound = self.config.once_max_wait_seconds if self.once else None
        try:
            retry_unavailable(
                action,
                on_retry=self._say_unavailable,
                sleep=self._sleep,
                stopping=lambda: self._stopping,
                max_wait=bound,
            )
        except KafkaUnavailableError as exc:
            if bound is None or self._stopping:
                raise
            raise self._gave_up(exc, bound) from None
        for line in self._reach.answered_all():
            self._notice(line)

    def _say_unavailable(self, error: KafkaUnavailableError, _delay: float) -> None:
        line = self._reach.failed(error)
        if line is not None:
            self._notice(line)

    def _gave_up(self, error: KafkaUnavailableError, waited: float) -> FerryError:
        return FerryError(
            f"{error}; gave up after {waited:.0f}s without an answer "
            "(ferry.once.max.wait.seconds bounds how long a --once run waits)"
        )

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def _start(self, spark: Any, f: _Flow) -> None:
        spec_json = f.spec.model_dump_json()
        reader = spark.readStream.format("ferry-mirror").option("spec", spec_json).load()
        writer = (
            reader.writeStream.format("ferry-mirror")
            .option("spec", spec_json)
            .option(
                "checkpointLocation",
                str(f.state.lease_checkpoint if f.spec.leased else f.state.checkpoint),
            )
            .queryName(f"ferry {f.flow.source} to {f.flow.target}")
        )
        if self.once:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{f.flow.trigger_interval_ms} milliseconds")
        f.state.stop_marker.unlink(missing_ok=True)
        if f.baseline is None:
            f.baseline = f.state.stats()
            f.started = time.monotonic()
        f.query = writer.start()
        f.retry_at = None
        f.healthy_at = time.monotonic() + HEALTHY_AFTER_SECONDS

    # --- watching ---------------------------------------------------------------------------

    def _watch(self, spark: Any, flows: list[_Flow]) -> None:
        while True:
            self._last_tick = time.monotonic()
            for f in flows:
                self._check(spark, f)
            self._update_progress(flows)
            if self._signals is not None:
                for line in self._signals.unheard():
                    self._notice(line)
            if all(f.progress.done for f in flows):
                return
            if self._stopping:
                self._stop_gracefully(flows)
                self._update_progress(flows)  # what the last batches or leases copied
                return
            time.sleep(0.25)

    def _check(self, spark: Any, f: _Flow) -> None:
        if f.progress.done:
            return
        if f.query is None:
            if f.retry_at is not None and time.monotonic() >= f.retry_at:
                self._start(spark, f)
            return
        if f.query.isActive:
            self._working_again(f)
            return
        failure = f.query.exception()
        if failure is None:
            f.progress.done = True  # --once reached the end offsets seen at start
            f.progress.seconds = time.monotonic() - f.started
            return
        text = str(failure)
        error = (
            error_from_text(text)
            or environment_error(text)
            or FerryError(f"flow {f.flow.name} failed in Spark: {_first_line(text)}")
        )
        retry = isinstance(error, KafkaUnavailableError) and not self._stopping
        kind = "unavailable" if retry else "fatal"
        f.errors[kind] = f.errors.get(kind, 0) + 1
        if not retry and self._keep_failed and not self._stopping:
            self._flow_failed(f, error)
            return
        if not retry:
            raise error
        assert isinstance(error, KafkaUnavailableError)
        self._flow_unavailable(f, error)

    def _flow_unavailable(self, f: _Flow, error: KafkaUnavailableError) -> None:
        now = time.monotonic()
        if f.down is None:
            f.down_since = now
        f.down = error
        line = self._reach.failed(error, f"flow {f.flow.name}")
        if line is not None:
            self._notice(line)
        bound = self.config.once_max_wait_seconds
        if self.once and now - f.down_since >= bound:
            raise self._gave_up(error, now - f.down_since)
        f.query = None
        f.retry_at = now + f.backoff.next_delay()
        f.progress.restarts += 1

    def _flow_failed(self, f: _Flow, error: FerryError) -> None:
        f.failed = error
        f.query = None
        f.retry_at = None
        f.down = None
        self._notice(
            f"flow {f.flow.name} failed: {error}. The other flows go on; restart it over the "
            "API once the cause is fixed (ferry run exits 1 with this error when stopped)"
        )

    def _working_again(self, f: _Flow) -> None:
        """A restarted query copied a batch, or ran long enough without failing: start the
        backoff over, and say the cluster answers again."""
        if f.backoff.failures == 0:
            return
        now = time.monotonic()
        progressed = f.query.lastProgress is not None
        if not progressed and (f.healthy_at is None or now < f.healthy_at):
            return
        f.backoff.reset()
        f.healthy_at = None
        if f.down is not None:
            line = self._reach.answered(f.down.cluster)
            if line is not None:
                self._notice(line)
            f.down = None

    def _stop_gracefully(self, flows: list[_Flow]) -> None:
        """Let each running batch finish (its copies are acked and committed), then stop.

        Under steady traffic a new batch starts as soon as one ends, so the planner is told
        first (a marker file) to plan no more; then the running batch is awaited.
        """
        for f in flows:
            if f.query is not None and f.query.isActive:
                f.state.directory.mkdir(parents=True, exist_ok=True)
                f.state.stop_marker.touch()
        for f in flows:
            if f.query is None or not f.query.isActive:
                continue
            deadline = time.monotonic() + 120
            while f.query.status.get("isTriggerActive") and time.monotonic() < deadline:
                time.sleep(0.1)
            f.query.stop()
            f.state.stop_marker.unlink(missing_ok=True)
            f.progress.seconds = time.monotonic() - f.started

    def _update_progress(self, flows: list[_Flow]) -> None:
        now = time.monotonic()
        for f in flows:
            stats = f.state.stats()
            base = f.baseline or {}
            p = f.progress
            p.records = stats.get("records", 0) - base.get("records", 0)
            p.copier = stats.get("copier", p.copier) or (f.head.copier if f.head else "")
            p.bytes = stats.get("bytes", 0) - base.get("bytes", 0)
            p.skipped = stats.get("skipped", 0) - base.get("skipped", 0)
            expired = stats.get("expired", 0) - base.get("expired", 0)
            if expired > p.expired:
                self._notice(
                    f"flow {f.flow.name}: {expired - p.expired} record(s) were deleted by "
                    f"retention on {f.flow.source} before they could be copied (see "
                    f"{f.state.directory / 'stats.json'} for the partitions)"
                )
                p.expired = expired
            p.lag = f.state.lag(stats)
            if not p.done:
                p.seconds = now - f.started
            then, records, size = f.last_sample
            if now - then >= 1.0:
                if then:
                    p.records_per_second = (p.records - records) / (now - then)
                    p.mb_per_second = (p.bytes - size) / (now - then) / 1e6
                f.last_sample = (now, p.records, p.bytes)
        self._on_progress([f.progress for f in flows])


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return text[:500]


def _serve_lease_signals(spark: Any, root: Any, leased: list[FlowConfig]) -> LeaseSignalServer:
    """On a cluster, the leased flows' state served to their tasks (engine/lease_signals.py),
    at the driver's address as Spark's executors reach it."""
    conf = spark.sparkContext.getConf()
    host = conf.get("spark.driver.host", "127.0.0.1")
    bind = conf.get("spark.driver.bindAddress", host)
    states = {flow.name: FlowState(flow_state_dir(root, flow)) for flow in leased}
    return LeaseSignalServer(states, bind, host).start()
