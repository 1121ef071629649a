"""The head start: while Spark starts, the driver copies.

Starting Spark takes seconds: its JVM, then a Python process for each planning step, then
the task workers. Records arriving meanwhile wait, so every start or restart of `ferry run`
would add those seconds to the recovery point. In a continuous run on a local master the
driver therefore copies each leased flow itself as soon as both clusters answer, with the
code a leased task runs (every partition in one bin, the same slices, positions committed
on the target the same way), until the first leased task starts.

The handover copies nothing twice and skips nothing: a starting task asks the head start to
stop and waits until it has committed its last slice and stopped, then resumes from the
position on the target, as any lease does (engine/handover.py). In exactly-once mode the task
also starts its producers afresh, which fences the head start's if it were somehow still
writing.

Only with a local master: the handover goes through the driver's state directory, which a
cluster's executors cannot see (engine/lease_signals.py serves them the markers that end a
lease, not this handover).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from ferry.config.model import ClusterConfig, FerryConfig, FlowConfig
from ferry.engine.flow_spec import FlowSpec
from ferry.engine.flow_state import FlowState
from ferry.engine.handover import HANDOVER_TIMEOUT_SECONDS
from ferry.errors import readable

__all__ = ["HeadStart", "head_start_spec"]

# The longest head start: Spark has long taken over by then (if not, it copies without one).
HEAD_START_SECONDS = 600


class HeadStart:
    """The driver copying one flow until Spark's first task of it takes over."""

    def __init__(
        self,
        spec: FlowSpec,
        stopping: Callable[[], bool],
        notice: Callable[[str], None],
    ) -> None:
        # Clients of their own, named so on the brokers, and closed when the head start ends
        # (the driver's other clients stay).
        self.client_id = f"ferry-head-start-{spec.flow.source}-to-{spec.flow.target}"
        self.spec = spec.model_copy(
            update={
                "source": _named(spec.source, self.client_id),
                "target": _named(spec.target, self.client_id),
            }
        )
        self.state = FlowState(spec.state_dir)
        self._stopping = stopping
        self._notice = notice
        self.copier = ""  # the copy loop it ran (native, python), once it ended
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"ferry head start {spec.flow.name}", daemon=True
        )

    def start(self) -> HeadStart:
        self.state.directory.mkdir(parents=True, exist_ok=True)
        self.state.handover_marker.unlink(missing_ok=True)
        self.state.head_start_marker.write_text(str(os.getpid()))
        self._thread.start()
        return self

    def over(self) -> bool:
        """A task asked to take over, ferry run is stopping, `stop` was called, or the flow
        was paused over the API."""
        return (
            self._stop.is_set()
            or self._stopping()
            or self.state.handover_marker.exists()
            or self.state.control().paused
        )

    def stop(self, timeout: float = HANDOVER_TIMEOUT_SECONDS) -> None:
        """End the head start after its current slice; returns once it committed and stopped."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        from pyspark.sql import Row

        from ferry.engine.copy import worker_clients
        from ferry.engine.spark.sink import MirrorSink
        from ferry.engine.spark.source import RANGE_FIELDS, Planner

        try:
            rows = Planner(self.spec).whole_flow()
            if rows and not self.over():
                sink = MirrorSink(self.spec, until=self.over)
                report = sink.write(
                    iter([Row(**dict(zip(RANGE_FIELDS, row, strict=True))) for row in rows])
                )
                self.copier = report.copier
        except Exception as exc:  # Spark's tasks copy instead, and say what is wrong
            text = readable(str(exc)).strip()
            reason = text.splitlines()[0] if text else type(exc).__name__
            self._notice(
                f"flow {self.spec.flow.name}: copying before Spark started stopped ({reason}); "
                "Spark's tasks take over"
            )
        finally:
            with contextlib.suppress(Exception):
                worker_clients.close_mentioning(self.client_id)
            self.state.head_start_marker.unlink(missing_ok=True)


def head_start_spec(config: FerryConfig, flow: FlowConfig, run_id: str) -> FlowSpec:
    """A flow's head start is one lease (whatever the flow's own mode: a `--once` run or
    micro-batches resume from the target's position too) of every partition in one bin."""
    leased = flow.model_copy(update={"lease_seconds": HEAD_START_SECONDS})
    return FlowSpec.of(config, leased, bins=1, leased=True, run_id=run_id)


def _named(cluster: ClusterConfig, client_id: str) -> ClusterConfig:
    roles = ("consumer", "producer", "admin")
    return cluster.model_copy(
        update={role: {**getattr(cluster, role), "client.id": client_id} for role in roles}
    )
