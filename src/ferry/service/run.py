"""`ferry run`'s composition root: the config in, every enabled flow replicated until done or
stopped, each flow's progress out.

Wired here, in this order: the controller over the control topic (what the API last changed,
restored into each flow's state before anything copies; the flows a control record turned on
or off run or not accordingly), the runner (Spark, the flows'
queries, the metrics endpoint), and with an API port the control API and its web console over
both; they are closed in reverse order however the run ends. What the run says goes to
`on_notice` (and to the web console's event list); the API's address to `on_api`; the flows'
progress to `on_progress`. A continuous run looks at the control topics every
`CONTROL_FOLLOW_SECONDS` for changes other processes recorded (`ferry switchover`) and acts
on them without a restart. A run that ends returns; one that fails raises its `FerryError`
(`ferry run` then exits 1 with it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ferry.config.model import FerryConfig
from ferry.engine.runner import FlowProgress, Runner
from ferry.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ferry.control.controller import Controller

__all__ = ["CONTROL_FOLLOW_SECONDS", "FerryRun", "RunOptions", "run"]

CONTROL_FOLLOW_SECONDS = 2.0  # how often a continuous run reads what others recorded

Notice = Callable[[str], None]
Progress = Callable[[list[FlowProgress]], None]


@dataclass(frozen=True)
class RunOptions:
    """How to run, besides the config: `ferry run`'s options."""

    once: bool = False  # copy everything available at start, then return
    metrics_port: int | None = None  # Prometheus /metrics and /healthz (0: any port)
    metrics_host: str = "127.0.0.1"  # where they listen (0.0.0.0 in a container)
    # The control API and its web console (0: any port). With it a flow that fails for good
    # stays `failed`, for the API to show and restart, and the others copy on.
    api_port: int | None = None
    api_host: str = "127.0.0.1"  # not loopback only with a token (api.token)


class FerryRun:
    """One `ferry run`: `run()` blocks until done or stopped; `request_stop()` (from another
    thread, or SIGINT/SIGTERM in the main thread) stops it after the current batch."""

    def __init__(
        self,
        config: FerryConfig,
        options: RunOptions | None = None,
        *,
        on_notice: Notice | None = None,
        on_progress: Progress | None = None,
        on_api: Callable[[str], None] | None = None,
        spark: SparkSession | None = None,
    ) -> None:
        """`spark`: a session to run on (tests); by default the run starts its own."""
        self.config = config
        self._spark = spark
        self.options = options or RunOptions()
        self._on_notice = on_notice or (lambda _line: None)
        self._on_progress = on_progress
        self._on_api = on_api or (lambda _url: None)
        self._runner: Runner | None = None
        self._stop_asked = False

    def request_stop(self) -> None:
        self._stop_asked = True
        if self._runner is not None:
            self._runner.request_stop()

    def run(self) -> list[FlowProgress]:
        from ferry.api.events import Events
        from ferry.control.controller import Controller

        _refuse_bad_graph(self.config)
        events = Events()  # what the web console shows of the run's lines

        def notice(line: str) -> None:
            self._on_notice(line)
            events.add(line)

        options = self.options
        with ExitStack() as stack:
            # A --once run waits for a cluster no longer than it waits to copy.
            wait = min(15.0, self.config.once_max_wait_seconds) if options.once else 15.0
            controller = Controller.of(self.config, notice, timeout=wait)
            stack.callback(controller.close)
            controller.restore()  # what the API last said, before anything copies
            effective = controller.effective()
            if effective is not self.config:  # a control record turned a flow on or off
                _refuse_bad_graph(effective)
            runner = self._runner = Runner(
                effective,
                once=options.once,
                spark=self._spark,
                on_progress=self._on_progress,
                on_notice=notice,
                metrics_port=options.metrics_port,
                metrics_host=options.metrics_host,
                keep_failed=options.api_port is not None,  # a failed flow stays, for the API
            )
            if self._stop_asked:
                runner.request_stop()
            if not options.once:
                stop_following = threading.Event()
                follower = threading.Thread(
                    target=_follow,
                    args=(controller, runner, stop_following),
                    name="ferry-control-follow",
                    daemon=True,
                )
                follower.start()
                stack.callback(follower.join, 20)
                stack.callback(stop_following.set)
            if options.api_port is not None:
                from ferry.api.server import serve

                api = serve(
                    self.config,
                    controller,
                    runner.flow_conditions,
                    options.api_host,
                    options.api_port,
                    restart=runner.restart,
                    events=events,
                )
                stack.callback(api.stop)
                self._on_api(api.url)
            return runner.run()


def run(
    config: FerryConfig,
    options: RunOptions | None = None,
    *,
    on_notice: Notice | None = None,
    on_progress: Progress | None = None,
    on_api: Callable[[str], None] | None = None,
) -> list[FlowProgress]:
    """Replicate every enabled flow of `config` until done (`options.once`) or stopped
    (SIGINT/SIGTERM); each flow's progress. Raises the `FerryError` that stopped the run."""
    return FerryRun(
        config, options, on_notice=on_notice, on_progress=on_progress, on_api=on_api
    ).run()


def _follow(controller: Controller, runner: Runner, stop: threading.Event) -> None:
    """Every CONTROL_FOLLOW_SECONDS, what other processes recorded in the control topics;
    a change of the flows that run reaches the runner once it held for two looks in a row
    (a switchover stops one flow before it starts the other)."""
    pending: FerryConfig | None = None
    while not stop.wait(CONTROL_FOLLOW_SECONDS):
        changed = controller.follow()
        if changed is not None:
            pending = changed
            continue
        if pending is not None:
            if pending.enabled_flows:
                runner.reconfigure(pending)
            pending = None


def _refuse_bad_graph(config: FerryConfig) -> None:
    """A graph that would copy records twice or forever does not start (the command line
    prints each route first; see ferry.graph.check)."""
    from ferry.graph.check import check_config

    report = check_config(config)
    if not report.ok:
        raise ConfigError(
            f"not started: {len(report.errors)} route(s) would copy records twice or forever "
            f"({report.errors[0].message}); change the flows' topics, topics.exclude or policy",
            file=str(config.path) if config.path else None,
        )
