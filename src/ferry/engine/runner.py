"""`ferry run`: one Spark Structured Streaming query per enabled flow, watched until done.

In a continuous run each query copies in leases by default (`ferry.lease.seconds`, see
engine/copy/lease.py); `--once` and `ferry.lease.seconds = 0` run bounded micro-batches. The
runner owns the Spark session and everything that runs beside the queries: the head start,
the lease signals and lease watch, the metrics endpoint, the graph watch and the control
plane. Each is registered in one `ExitStack` as it starts, so a run that stops or fails
closes whatever started, in reverse order. Each flow's query is a `FlowQuery`; what happens
when it stops (retried, kept as failed for the API, or the run's error) is its
`FlowSupervisor`'s call (engine/flow_supervisor.py).

The flows that run may change while it runs (`reconfigure`: a control record turned one on or
off, as `ferry switchover` does): the running flows stop after their current slice, as at a
stop, and the new set starts on the same Spark session, each from its position on the target.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from ferry.config.model import FerryConfig, FlowConfig
from ferry.engine.flow_query import FlowProgress, FlowQuery
from ferry.engine.flow_spec import FlowSpec, flow_state_dir
from ferry.engine.flow_state import FlowState
from ferry.engine.flow_supervisor import FlowSupervisor
from ferry.engine.graph_watch import GraphWatch
from ferry.engine.head_start import HeadStart, head_start_spec
from ferry.engine.lease_signal_server import LeaseSignalServer
from ferry.engine.lease_watch import AssignmentWatch
from ferry.engine.link_settings import is_far, wan_consumer_settings, wan_task_slots
from ferry.engine.preflight import Retrier, check_copier, fence_flow, prepare
from ferry.engine.rpo_watch import RpoMetrics, RpoWatch
from ferry.engine.spark.cores import available_cores
from ferry.engine.spark.session import (
    DEFAULT_MAX_FAILURES,
    master_chosen,
    spark_master,
    start_spark,
)
from ferry.errors import FerryError
from ferry.flows.status import Condition
from ferry.http.metrics_server import MetricsServer
from ferry.kafka.reachability import Reachability
from ferry.kafka.round_trip import round_trip_ms
from ferry.signals import stop_on_signals
from ferry.sync.loop import SyncLoop

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from ferry.engine.spark.class_archive import ClassArchive

__all__ = ["FlowProgress", "Runner"]

# Each flow's head start, its counters and the time from before it copied anything.
Early = dict[str, tuple[HeadStart, dict[str, Any], float]]
# Each timed request of the round trip to a source (kafka/round_trip.py); it answered already.
LINK_PROBE_TIMEOUT_SECONDS = 5.0


def _stop_queries(flows: list[FlowQuery]) -> None:
    for f in flows:
        f.stop()  # if it still runs


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
        spark: SparkSession | None = None,
        on_progress: Callable[[list[FlowProgress]], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
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
        self._next: FerryConfig | None = None  # reconfigure(): the flows to run next
        self._session: SparkSession | None = None  # the Spark session, kept across reconfigurations
        self._metrics_port = metrics_port
        self._metrics_host = metrics_host
        self._keep_failed = keep_failed and not once  # a --once run must end
        self.metrics_url: str | None = None  # set once the metrics endpoint is serving
        self._last_tick = time.monotonic()
        self._reach = Reachability()  # what the console last said of each cluster
        self._flows: list[FlowQuery] = []  # while running (the API asks how each flow is)
        self._signals: LeaseSignalServer | None = None  # on a cluster, while running
        self._retrying = Retrier(
            config,
            once=once,
            reach=self._reach,
            notice=self._notice,
            stopping=lambda: self._stopping,
        )

    # --- lifecycle --------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after the current batch of every flow, as the first Ctrl-C does."""
        self._stopping = True

    def reconfigure(self, config: FerryConfig) -> None:
        """Run `config`'s enabled flows from now on (from another thread): the running ones
        stop after their current slice and the new set starts. A `--once` run, or a config
        that enables no flow, changes nothing."""
        if not self.once and config.enabled_flows:
            self._next = config

    def run(self) -> list[FlowProgress]:
        """Copy until done (`--once`) or stopped; SIGINT/SIGTERM stop after the current batch."""
        with stop_on_signals(self._stop_on_signal), ExitStack() as session:
            while True:
                progress = self._run(session)
                if self._next is None or self._stopping:
                    break
                self.config, self._next = self._next, None
                self._retrying = Retrier(
                    self.config,
                    once=self.once,
                    reach=self._reach,
                    notice=self._notice,
                    stopping=lambda: self._stopping,
                )
                self._flows = []
                names = ", ".join(f.name for f in self.config.enabled_flows)
                self._notice(f"running flows {names} from now on, as the control state says")
        for f in self._flows:
            f.supervisor.raise_failure()  # kept for the API while running; still the exit
        return progress

    def flow_conditions(self) -> dict[str, Condition]:
        """Per running flow, why it does not copy now: a cluster that does not answer, or an
        error that stopped it."""
        return {f.flow.name: f.supervisor.condition() for f in list(self._flows)}

    def restart(self, name: str) -> bool:
        """Start a failed flow again (from its position, as any restart); False if the flow
        has not failed. Called from the API's thread: the watch loop starts the query."""
        return any(f.supervisor.restart() for f in list(self._flows) if f.flow.name == name)

    def _stop_on_signal(self) -> None:
        self._stopping = True
        self._notice("stopping after the current batch (Ctrl-C again to stop now)")

    def _run(self, session: ExitStack) -> list[FlowProgress]:
        flows = self._flows
        with ExitStack() as stack:
            # Clusters first: an unreachable or misconfigured one is reported before Spark
            # spends seconds starting.
            for flow in self.config.enabled_flows:
                prepare(self.config, flow, self._retrying)
                check_copier(flow, self._notice, self.config.syncs_schemas(flow))
                if flow.exactly_once:
                    # Every slot an earlier plan used (the state directory remembers), and at
                    # least as many as this machine's cores or ferry.bins.
                    state = FlowState(flow_state_dir(self.config.state_dir.resolve(), flow))
                    slots = max(state.task_slots(), flow.bins, os.cpu_count() or 1)
                    fence_flow(self.config, flow, slots, self._retrying)
            self._fit_links()
            # The graph over real topics, before anything copies (the head start included).
            root = self.config.state_dir.resolve()
            graph = GraphWatch(
                self.config,
                {f.name: FlowState(flow_state_dir(root, f)) for f in self.config.enabled_flows},
                self._notice,
            )
            graph.check()
            run_id = uuid.uuid4().hex
            early = self._head_start(run_id, stack)
            spark = self._session = self._session or self._start_spark(session)
            # Executors still registering count as Spark's default parallelism, until the
            # lease watch counts them.
            cores = available_cores(spark) or int(spark.sparkContext.defaultParallelism)
            leased = [f for f in self.config.enabled_flows if f.leased and not self.once]
            signals = None
            if leased and not self._local_master():
                signals = self._serve_lease_signals(spark, root, leased, stack)
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
                flows.append(
                    FlowQuery(flow, spec, FlowState(spec.state_dir), self._supervisor(flow))
                )
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
            self._serve_metrics(flows, stack)
            # Each flow's RPO, for the metrics and the API, every few seconds (rpo_watch.py).
            stack.enter_context(RpoWatch(self.config, [(f.flow, f.state) for f in flows]))
            leases = [(f.flow, f.state) for f in flows if f.spec.leased]
            watch = AssignmentWatch(
                self.config,
                leases,
                lambda: self._stopping,
                slots=lambda: _share(available_cores(spark), len(leases)),
                notice=self._notice,
            )
            watch.check_slots()  # before the first lease is planned: a last run's is stale
            stack.callback(_stop_queries, flows)
            for f in flows:
                f.start(spark, once=self.once)
            watch.start()
            stack.callback(watch.stop)
            if not self.once:
                graph.start()
                stack.callback(graph.stop)
            states = {f.flow.name: f.state for f in flows}
            plane = SyncLoop(
                self.config, self._notice, self._reach, lambda flow: states[flow.name].control()
            )
            if not self.once:
                plane.start()
            stack.callback(plane.stop)  # closes its clients, started or not
            self._watch(spark, flows)
            if self.once and not self._stopping:
                # After copying: checkpoints (and group sync) as of now, then exit.
                self._retrying(plane.run_once)
        return [f.progress for f in flows]

    def _fit_links(self) -> None:
        """Each source measured (a metadata round trip, once both clusters answered); one
        across a wide-area link is read with the WAN consumer settings the user did not set
        (engine/link_settings.py), and said."""
        clusters = dict(self.config.clusters)
        far = False
        for alias in sorted({f.source for f in self.config.enabled_flows}):
            cluster = clusters[alias]
            measured = round_trip_ms(cluster.admin_config(), timeout=LINK_PROBE_TIMEOUT_SECONDS)
            far = far or is_far(measured)
            extra = wan_consumer_settings(measured, cluster.consumer_config())
            if not extra or measured is None:
                continue
            clusters[alias] = cluster.model_copy(update={"consumer": {**cluster.consumer, **extra}})
            settings = ", ".join(f"{key} = {value}" for key, value in extra.items())
            self._notice(
                f"cluster {alias} is {measured:.0f} ms away (a metadata round trip): reading it "
                f"with the settings for a wide-area link ({settings}); set them per cluster "
                f"({alias}.consumer.<key>) to choose others"
            )
        self.config = self.config.model_copy(update={"clusters": clusters})
        if far and not master_chosen(self.config):
            self._more_tasks_for_far_sources()

    def _more_tasks_for_far_sources(self) -> None:
        """A local Spark of ferry's choosing copies from a far source with more task slots
        than cores (engine/link_settings.py says why)."""
        cores = os.cpu_count() or 1
        slots = wan_task_slots(cores)
        if slots <= cores:
            return
        master = f"local[{slots},{DEFAULT_MAX_FAILURES}]"
        spark = {**self.config.spark, "spark.master": master}
        self.config = self.config.model_copy(update={"spark": spark})
        self._notice(
            f"copying with {slots} Spark tasks on {cores} cores (spark.master = {master}): "
            "across a wide-area link each task's records wait for its fetches' answers, which "
            "are shorter with fewer partitions per task; set spark.master to choose"
        )

    def _supervisor(self, flow: FlowConfig) -> FlowSupervisor:
        return FlowSupervisor(
            flow.name,
            notice=self._notice,
            reach=self._reach,
            once=self.once,
            keep_failed=self._keep_failed,
            once_max_wait=self.config.once_max_wait_seconds,
        )

    def _head_start(self, run_id: str, stack: ExitStack) -> Early:
        """Flows copied by the driver while Spark starts (engine/head_start.py), by name, with
        their counters and the time from before it copied anything."""
        if not self._local_master():
            return {}
        early: Early = {}
        heads: list[HeadStart] = []
        stack.callback(self._stop_head_starts, heads)
        for flow in self.config.enabled_flows:
            if not flow.head_start_enabled:
                continue
            spec = head_start_spec(self.config, flow, run_id)
            state = FlowState(spec.state_dir)
            state.stop_marker.unlink(missing_ok=True)  # left by an earlier run
            baseline, started = state.stats(), time.monotonic()
            heads.append(HeadStart(spec, lambda: self._stopping, self._notice).start())
            early[flow.name] = (heads[-1], baseline, started)
        return early

    def _stop_head_starts(self, heads: list[HeadStart]) -> None:
        for head in heads:
            head.stop()
        if heads and self._flows:
            self._update_progress(self._flows)  # what a head start copied after the last look

    def _start_spark(self, stack: ExitStack) -> SparkSession:
        """The session given, or one started (and its JVM's class archive written at exit)."""
        if self._spark is not None:
            spark = self._spark
        else:
            spark, archive = start_spark(self.config, write_class_archive=True, notice=self._notice)
            if archive is not None:
                stack.callback(self._finish_class_archive, archive, spark, lambda: self._stopping)
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        from ferry.engine.spark.source import MirrorDataSource

        spark.dataSource.register(MirrorDataSource)
        return spark

    @staticmethod
    def _finish_class_archive(
        archive: ClassArchive, spark: SparkSession, stopped: Callable[[], bool]
    ) -> None:
        """After every query stopped, the JVM ends and writes the archive: the next run's JVM
        starts faster. A run stopped by a signal (or the API) does not wait for the write: its
        JVM is ended at once and a run that ends by itself (`--once`) writes the archive."""
        if archive.pending is None:
            return
        if stopped():
            archive.finish(spark, timeout=0.0)
        else:
            archive.finish(spark)

    def _local_master(self) -> bool:
        if self._spark is not None:
            return str(self._spark.sparkContext.master).startswith("local")
        return spark_master(self.config).startswith("local")

    def _serve_lease_signals(
        self, spark: SparkSession, root: Path, leased: list[FlowConfig], stack: ExitStack
    ) -> LeaseSignalServer:
        """On a cluster, the leased flows' state served to their tasks (engine/lease_signals.py),
        at the driver's address as Spark's executors reach it."""
        conf = spark.sparkContext.getConf()
        host = conf.get("spark.driver.host", "127.0.0.1")
        bind = conf.get("spark.driver.bindAddress", host)
        states = {flow.name: FlowState(flow_state_dir(root, flow)) for flow in leased}
        signals = self._signals = LeaseSignalServer(states, bind, host).start()
        stack.callback(self._stop_lease_signals, signals)  # after the queries: their leases ask
        self._notice(f"leased tasks ask ferry run at {signals.url} (lease signals)")
        return signals

    def _stop_lease_signals(self, signals: LeaseSignalServer) -> None:
        signals.stop()
        self._signals = None

    def _serve_metrics(self, flows: list[FlowQuery], stack: ExitStack) -> None:
        if self._metrics_port is None:
            return
        from prometheus_client import CollectorRegistry

        from ferry.engine.run_metrics import RunMetrics

        registry = CollectorRegistry()
        registry.register(
            RunMetrics(lambda: [(f.flow.name, f.state, f.supervisor.errors) for f in flows])
        )
        registry.register(RpoMetrics(lambda: [(f.flow.name, f.state) for f in flows]))
        # Healthy while the watch loop turns: a wedged driver fails its liveness probe.
        host = self._metrics_host
        server = MetricsServer(registry, self._health, port=self._metrics_port, host=host).start()
        stack.callback(server.stop)
        self.metrics_url = f"http://{host}:{server.port}/metrics"
        self._notice(
            f"metrics on {self.metrics_url}, health on http://{host}:{server.port}/healthz"
        )

    def _health(self) -> tuple[bool, str]:
        idle = time.monotonic() - self._last_tick
        if idle < 30:
            return True, "ok"
        return False, f"ferry run's driver loop has not turned for {idle:.0f}s"

    # --- watching ---------------------------------------------------------------------------

    def _watch(self, spark: SparkSession, flows: list[FlowQuery]) -> None:
        while True:
            self._last_tick = time.monotonic()
            for f in flows:
                f.check(spark, once=self.once, stopping=self._stopping)
            self._update_progress(flows)
            if self._signals is not None:
                for line in self._signals.unheard():
                    self._notice(line)
            if all(f.progress.done for f in flows):
                return
            if self._stopping or self._next is not None:
                self._stop_gracefully(flows)
                self._update_progress(flows)  # what the last batches or leases copied
                return
            time.sleep(0.25)

    def _stop_gracefully(self, flows: list[FlowQuery]) -> None:
        """Let each running batch finish (its copies are acked and committed), then stop.

        Under steady traffic a new batch starts as soon as one ends, so the planner is told
        first (a marker file) to plan no more; then the running batch is awaited.
        """
        for f in flows:
            f.ask_to_stop()
        for f in flows:
            f.stop_after_batch()

    def _update_progress(self, flows: list[FlowQuery]) -> None:
        now = time.monotonic()
        for f in flows:
            f.update_progress(now, self._notice)
        self._on_progress([f.progress for f in flows])
